"""``report.md`` (and a PNG of the differences) for a parity comparison."""

from __future__ import annotations

import platform
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.compare.batch import ParityBatch, ParityResult
from agentrl_plugins.compare.record import LIMITS
from agentrl_plugins.compare.runner import FrameworkEnv
from agentrl_plugins.compare.table import TOLERANCE, ParityTable, differences_markdown, markdown
from agentrl_plugins.recipe_schema import Recipe


@dataclass(frozen=True)
class ParityRun:
    """Everything a parity report shows."""

    recipe: Recipe
    overrides: dict
    batch: ParityBatch
    envs: Sequence[FrameworkEnv]
    results: Sequence[ParityResult]
    table: ParityTable


def batch_summary(recipe: Recipe, batch: ParityBatch) -> str:
    """What the recorded batch contains, in a few lines."""
    mask = batch.response_mask.bool()
    valid = RecipeAlgorithm.from_recipe(recipe).valid(batch.terminations)
    groups = batch.rewards.view(-1, recipe.rollout.group_size)
    equal = int((groups == groups[:, :1]).all(dim=1).sum())
    lengths = mask.sum(-1)
    mismatch = (batch.old_logprobs - batch.sampler_logprobs)[mask]
    ratio = (batch.logprobs - batch.old_logprobs)[mask].exp()
    low, high = 1 - recipe.loss.clip_low, 1 + recipe.loss.clip_high
    ends = ", ".join(f"{reason} {count}" for reason, count in sorted(Counter(batch.terminations).items()))
    return "\n".join([
        f"- {len(batch.rewards)} trajectories in {groups.size(0)} groups of {recipe.rollout.group_size}; "
        f"{equal} group(s) with equal rewards; mean reward {batch.rewards.mean().item():.3f}; "
        f"{int(batch.hacked.sum())} hacked",
        f"- policy tokens per trajectory: {int(lengths.min())} to {int(lengths.max())} (padded width "
        f"{mask.size(1)}); terminations: {ends}; compact-filtered by the recipe: {int((~valid).sum())}",
        f"- injected sampler/learner mismatch (learner - sampler log-prob on policy tokens): mean "
        f"{mismatch.mean().item():+.3f}, range [{mismatch.min().item():.3f}, {mismatch.max().item():.3f}]",
        f"- update ratio exp(logprobs - old_logprobs): below {low:g} on {(ratio < low).float().mean().item():.1%} "
        f"of policy tokens, above {high:g} on {(ratio > high).float().mean().item():.1%}, above the dual clip "
        f"{recipe.loss.clip_c} on {(ratio > (recipe.loss.clip_c or float('inf'))).float().mean().item():.1%}",
        f"- recorded with {LIMITS} (episodes the environment scripts to be truncated get a smaller "
        f"max_context_tokens), ByteChatTokenizer, the scripted policies of environment {recipe.environment.name!r}",
    ])


def mapping_markdown(results: Sequence[ParityResult]) -> str:
    lines = ["| framework | recipe key | value | setting | status | note |", "|---|---|---|---|---|---|"]
    for result in results:
        for row in result.mapping:
            lines.append(f"| {result.framework} | {row['key']} | {row['value']} | {row['setting']} | "
                         f"{row['status']} | {row['note']} |")
    return "\n".join(lines)


def plot(table: ParityTable, out: Path) -> Path | None:
    """Bar chart of the largest difference per framework and quantity (log scale, tolerance line)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    frameworks = list(dict.fromkeys(row.framework for row in table.rows))
    quantities = list(dict.fromkeys(row.quantity for row in table.rows))
    figure, axis = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(frameworks)
    for i, framework in enumerate(frameworks):
        values = {row.quantity: max(row.max_abs_diff, 1e-18) for row in table.rows if row.framework == framework}
        axis.bar([q + i * width for q in range(len(quantities))], [values[q] for q in quantities], width,
                 label=framework)
    axis.axhline(TOLERANCE, color="red", linestyle="--", label=f"tolerance {TOLERANCE:g}")
    axis.set_yscale("log")
    axis.set_xticks([q + width * (len(frameworks) - 1) / 2 for q in range(len(quantities))], quantities)
    axis.set_ylabel("max abs difference vs core (1e-18 = identical)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)
    return out


def ranks_summary(ranks: int) -> str:
    """How the batch was split over data-parallel trainer ranks (nothing to say for one)."""
    if ranks == 1:
        return ""
    return (f"\n\nEach framework's trainer ran on {ranks} data-parallel ranks: row i on rank i mod {ranks}, so every "
            "group's members sit on different ranks; each rank computed its loss with the framework's global "
            "denominators, and the loss and gradient are what its gradient all-reduce (a mean over ranks) leaves. "
            "The core reference is the one-rank computation: an exact row means the split changed nothing.")


def write_report(run: ParityRun, folder: Path) -> Path:
    """``folder/report.md`` and ``folder/parity.png``; returns the report's path."""
    picture = plot(run.table, folder / "parity.png")
    verdict = (f"every exact component agrees within {TOLERANCE:g}" if not run.table.mismatches else
               f"{len(run.table.mismatches)} MISMATCH row(s) beyond {TOLERANCE:g}")
    overrides = ", ".join(f"{k}={v}" for k, v in run.overrides.items()) or "none"
    versions = "\n".join(f"- {r.framework}: " + ", ".join(f"{k} {v}" for k, v in r.versions.items())
                         + f" (Python {e.python}, found by {e.found_by})" for r, e in zip(run.results, run.envs))
    text = "\n\n".join([
        f"# Parity: {run.recipe.name} across {', '.join(r.framework for r in run.results)}",
        f"**Verdict: {verdict}.**",
        "## What was compared\n\nOne recorded batch went through each framework's own advantage, correction and "
        "loss code, with the recipe mapped by that framework's adapter, and through the core reference "
        "(`agentrl_plugins.algorithms`). Compared: per-trajectory advantages, per-token correction weights, "
        "the loss, and its gradient with respect to the learner's per-token log-probs (a model's parameter "
        "gradient is this times the same Jacobian in every framework), all in float64.\n\n"
        f"Recipe `{run.recipe.name}` ({run.recipe.description}); overrides: {overrides}.\n\n"
        + batch_summary(run.recipe, run.batch) + ranks_summary(run.batch.ranks),
        f"## Versions and seeds\n\n{versions}\n- core: Python {platform.python_version()}\n\n"
        f"Batch seed {run.batch.seed} (episodes and log-probs); recipe seed {run.recipe.train.seed}. "
        "The same seed gives the same batch and the same table.",
        "## How each framework maps the compared keys\n\n" + mapping_markdown(run.results),
        f"## Parity table\n\nExact means a max abs difference within {TOLERANCE:g}. 'held to' is the reference "
        "the framework is checked against: the recipe's, or the recipe with the framework's by-design "
        "difference applied.\n\n" + markdown(run.table),
        "## Differences by design\n\n" + differences_markdown(run.table),
        "## Files\n\n`parity_input.json` (the batch and recipe), `parity_<framework>.json` (each framework's "
        "numbers), in the format of `agentrl_plugins/compare/batch.py`."
        + (f" Plot: `{picture.name}`." if picture else ""),
    ])
    path = folder / "report.md"
    path.write_text(text + "\n")
    return path
