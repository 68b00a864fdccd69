"""``report.md`` and PNG curves for one run, or for several runs side by side."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Sequence

from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.user_config import SETTING_COLUMNS, USER

CURVES = (
    ("train_reward", "train reward"),
    ("heldout_pass1", "held-out pass@1"),
    ("hacked_fraction", "hacked fraction (train)"),
    ("filtered_fraction", "compact-filtered fraction"),
    ("clip_fraction", "clip fraction"),
    ("is_capped_fraction", "IS-capped fraction"),
    ("entropy", "entropy"),
)


def plot_curves(runs: dict[str, list[StepMetrics]], out: Path) -> Path:
    """One panel per metric, one line per run; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 4, figsize=(16, 7), constrained_layout=True)
    for axis, (field, title) in zip(axes.flat, CURVES):
        for label, rows in runs.items():
            points = [(r.step, getattr(r, field)) for r in rows if getattr(r, field) is not None]
            if points:
                axis.plot(*zip(*points), marker="o", markersize=3, label=label)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        axes.flat[-1].legend(handles, labels, loc="center")
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def _table(rows: Sequence[StepMetrics]) -> str:
    header = ("| step | train reward | held-out pass@1 | hacked | filtered | clip | IS-capped | entropy "
              "| policy tokens | s | rollout s | eval s |")
    lines = [header, "|" + "---|" * 12]
    for r in rows:
        cells = [r.train_reward, r.heldout_pass1, r.hacked_fraction, r.filtered_fraction, r.clip_fraction,
                 r.is_capped_fraction, r.entropy]
        shown = " | ".join("" if value is None else f"{value:.3f}" for value in cells)
        timing = " | ".join("" if value is None else f"{value:.1f}" for value in (r.rollout_seconds, r.eval_seconds))
        lines.append(f"| {r.step} | {shown} | {r.policy_tokens} | {r.seconds:.1f} | {timing} |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_section(info: dict[str, Any]) -> str:
    """The command as it ran and every setting's origin (``run.json``'s ``command_as_run`` and ``settings``,
    recorded by verl's and OpenRLHF's drivers); the settings you set come first: they change what the recipe alone
    would have trained. Empty for a run that recorded neither."""
    ran, rows = info.get("command_as_run"), info.get("settings") or []
    if not ran and not rows:
        return ""
    text = "## Settings\n\n"
    if ran:
        text += f"The command as it ran:\n\n```\n{shlex.join(ran)}\n```\n\n"
    if rows:
        yours = [row for row in rows if row[2] == USER]
        text += (f"{len(yours)} setting(s) you set"
                 f"{': ' + ', '.join(f'`{row[0]}`' for row in yours) if yours else ''}. Every setting and its "
                 "origin:\n\n")
        ordered = [*yours, *(row for row in rows if row[2] != USER)]
        lines = ["| " + " | ".join(SETTING_COLUMNS) + " |", "|" + "---|" * len(SETTING_COLUMNS)]
        lines += ["| " + " | ".join(_cell(str(cell)) for cell in row) + " |" for row in ordered]
        text += "\n".join(lines) + "\n"
    return text


def write_report(run: RunDir, others: dict[str, RunDir] | None = None) -> Path:
    """Write ``report.md`` and ``curves.png`` into the run folder; ``others`` adds runs to compare against."""
    info = run.run_info()
    rows = run.read_metrics()
    verifier = "+".join(run.load_recipe().verifier.names)
    label = f"{info['recipe']} ({info['framework']}, seed {info['seed']}, {verifier})"
    runs = {label: rows, **{name: other.read_metrics() for name, other in (others or {}).items()}}
    plot_curves(runs, run.path / "curves.png")
    evaluated = [r for r in rows if r.heldout_pass1 is not None]
    summary = ""
    if evaluated:
        first, last = evaluated[0], evaluated[-1]
        summary = (f"Held-out pass@1 went from {first.heldout_pass1:.3f} (step {first.step}) to "
                   f"{last.heldout_pass1:.3f} (step {last.step}); "
                   f"{sum(r.seconds for r in rows):.0f} s training, {sum(r.eval_seconds or 0 for r in rows):.0f} s "
                   f"evaluating.\n\n")
    versions = ", ".join(f"{name} {version}" for name, version in info["versions"].items())
    text = (f"# {label}\n\n{summary}![curves](curves.png)\n\n"
            f"Recipe: `recipe.toml` (resolved). Versions: {versions}.\n\n## Per step\n\n{_table(rows)}\n")
    section = settings_section(info)
    if section:
        text += f"\n{section}"
    run.report_file.write_text(text)
    return run.report_file
