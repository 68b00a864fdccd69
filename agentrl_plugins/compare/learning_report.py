"""``learning.md`` and ``learning.png`` for a learning comparison: curves over seeds, a table per arm, flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from agentrl_plugins.compare.learning import ArmResult, Flag, flags, mean_curves

PANELS = (("heldout_pass1", "held-out pass@1"), ("heldout_hacked_fraction", "held-out hacked fraction"),
          ("train_reward", "train reward"), ("hacked_fraction", "hacked fraction (train)"))


def plot(results: Sequence[ArmResult], out: Path) -> Path:
    """One panel per figure: each arm's mean over seeds, shaded from the lowest to the highest seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PANELS), figsize=(4.5 * len(PANELS), 3.8), constrained_layout=True)
    for axis, (field, title) in zip(axes, PANELS):
        for result in results:
            steps, mean, low, high = mean_curves(result, field)
            if steps:
                line, = axis.plot(steps, mean, marker="o", markersize=3, label=result.arm.label)
                axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def _cell(value: Any, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def arms_table(results: Sequence[ArmResult]) -> str:
    """A row per arm: held-out start/end over seeds, the gain, and the per-step means (s/step counts the
    evaluations too)."""
    lines = ["| arm | seeds | held-out start | held-out end | end spread | gain | learns | train reward | "
             "hacked (train) | held-out hacked, start -> end | filtered | clip | IS-capped | policy tokens | s/step |",
             "|" + "---|" * 15]
    for result in results:
        s = result.summary
        lines.append(
            f"| {result.arm.label} | {', '.join(map(str, result.runs))} | {s['start_mean']:.3f} | "
            f"{s['end_mean']:.3f} | {s['end_spread']:.3f} | {s['gain']:+.3f} | {'yes' if s['learns'] else 'no'} | "
            f"{_cell(s['train_reward'])} | {_cell(s['hacked_fraction'])} | "
            f"{s['start_heldout_hacked']:.3f} -> {s['end_heldout_hacked']:.3f} | "
            f"{_cell(s['filtered_fraction'])} | {_cell(s['clip_fraction'])} | {_cell(s['is_capped_fraction'])} | "
            f"{s['policy_tokens']} | {s['seconds_per_step']:.2f} |")
    return "\n".join(lines)


def episodes_table(results: Sequence[ArmResult]) -> str:
    """A row per arm: the training episodes' figures, means over steps and seeds."""
    lines = ["| arm | policy tokens per success | per failure | redundant turns per success |", "|---|---|---|---|"]
    lines += [f"| {r.arm.label} | {_cell(r.summary['success_tokens'], 1)} | {_cell(r.summary['failure_tokens'], 1)} | "
              f"{_cell(r.summary['redundant_per_success'], 2)} |" for r in results]
    return "\n".join(lines)


def seeds_table(results: Sequence[ArmResult]) -> str:
    """A row per arm and seed; steps without gradient are those whose every episode was compact-filtered."""
    lines = ["| arm | seed | held-out start | held-out end | steps without gradient | s/step | run folder |",
             "|---|---|---|---|---|---|---|"]
    for result in results:
        for figures in result.summary["seeds"]:
            run = result.runs[figures["seed"]]
            lines.append(f"| {result.arm.label} | {figures['seed']} | {figures['start']:.3f} | {figures['end']:.3f} "
                         f"| {figures['steps_without_gradient']} of {figures['steps']} "
                         f"| {figures['seconds_per_step']:.2f} | `{run.path.parent.name}/{run.path.name}` |")
    return "\n".join(lines)


def flags_markdown(found: Sequence[Flag], by_design: str = "") -> str:
    """Each flagged pair; where a parity run named differences by design (markdown), they follow as candidates."""
    if not found:
        return "No two arms differ in mean end pass@1 by more than the larger of their seed spreads."
    lines = [f"- **{f.second.label}** vs **{f.first.label}**: end pass@1 differs by {f.difference:+.3f}, more than "
             f"the seed spread {f.spread:.3f}." for f in found]
    if by_design:
        lines.append(f"\nDifferences by design that the parity check found, the first places to look:\n\n{by_design}")
    return "\n".join(lines)


def write_learning_report(results: Sequence[ArmResult], shared_budget: dict[str, Any], overrides: Sequence[str],
                          folder: Path, by_design: str = "") -> Path:
    """``folder/learning.md`` and ``folder/learning.png``; returns the report's path."""
    picture = plot(results, folder / "learning.png")
    found = flags(results)
    budget_lines = "\n".join(f"- {key}: {value}" for key, value in shared_budget.items())
    first_run = next(iter(results[0].runs.values()))
    versions = "\n".join(
        f"- {result.arm.label}: " + ", ".join(f"{name} {version}" for name, version in
                                              next(iter(result.runs.values())).run_info()["versions"].items())
        for result in results)
    text = "\n\n".join([
        "# Learning: " + " vs ".join(result.arm.label for result in results),
        "Each arm trained with `agentrl run` in its framework's environment, from the same starting model "
        f"({first_run.run_info().get('model', 'tinyagent')}), on the same seeds and sample budget. "
        "Held-out pass@1 counts honest passes of the held-out families. An arm *learns* when its mean gain "
        "exceeds the spread (max - min) of its end values across seeds.",
        f"![learning curves]({picture.name})",
        "## Arms\n\n" + arms_table(results),
        "## Episodes\n\nOver each step's training episodes, filtered ones included: the mean policy tokens of the "
        "honest successes and of the other episodes, and the turns the environment flagged redundant per "
        "success.\n\n" + episodes_table(results),
        "## Flagged differences\n\n" + flags_markdown(found, by_design),
        "## Per seed\n\n" + seeds_table(results),
        "## Budget and versions\n\nShared by every arm:\n\n" + budget_lines
        + f"\n\nOverrides: {', '.join(overrides) or 'none'}.\n\n" + versions,
    ])
    path = folder / "learning.md"
    path.write_text(text + "\n")
    return path
