"""Learning comparisons: recipes and frameworks through each framework's real trainer, same seeds, same budget.

Every *arm* (a recipe on a framework) trains once per seed with ``agentrl run`` in that framework's
environment (found as for parity, :mod:`agentrl_plugins.compare.runner`), into
``OUT/<framework>-<recipe>/seed<N>``. A seed whose folder already holds a report is read back, not
rerun, so an interrupted comparison continues where it stopped; a folder without a report is started
over. Arms are compared on their end-of-training held-out pass@1: a difference of the means larger
than the larger of the two seed spreads is flagged.
"""

from __future__ import annotations

import itertools
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from agentrl_plugins.compare.runner import FrameworkEnv, FrameworkEnvError, check_frameworks, find_env
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import default_profile, load_recipe, parse_overrides
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import EPISODE_FIGURES
from agentrl_plugins.runs.learning import learning_summary, seed_figures
from agentrl_plugins.runs.rundir import RunDir

MEAN_FIGURES = ("train_reward", "hacked_fraction", "filtered_fraction", "clip_fraction", "is_capped_fraction",
                "entropy", *EPISODE_FIGURES)


def recipe_label(recipe: str) -> str:
    """A registered recipe's name, or a recipe file's stem."""
    return Path(recipe).stem if recipe.endswith(".toml") else recipe


@dataclass(frozen=True)
class Arm:
    """One recipe on one framework."""

    recipe: str
    framework: str

    @property
    def name(self) -> str:
        return recipe_label(self.recipe)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.framework})"

    @property
    def folder(self) -> str:
        return f"{self.framework}-{self.name}"


@dataclass(frozen=True)
class ArmResult:
    """An arm's runs by seed and the figures over its seeds."""

    arm: Arm
    runs: dict[int, RunDir]
    summary: dict[str, Any]


@dataclass(frozen=True)
class Flag:
    """Two arms whose mean end pass@1 differ by more than the larger seed spread."""

    first: Arm
    second: Arm
    difference: float
    spread: float


def plan_arms(recipes: Sequence[str], frameworks: Sequence[str]) -> list[Arm]:
    """Every recipe on every framework; at least two arms, each named once."""
    check_frameworks(list(frameworks))
    if len(set(recipes)) != len(recipes) or not recipes:
        raise AgentRLError(f"name each recipe once (got {list(recipes)})")
    arms = [Arm(recipe, framework) for recipe, framework in itertools.product(recipes, frameworks)]
    if len(arms) < 2:
        raise AgentRLError("a learning comparison needs two arms: two recipes (agentrl compare A B --frameworks trl) "
                           "or two frameworks (agentrl compare A --frameworks trl,verl)")
    return arms


def resolved_recipe(recipe: str, override_items: Sequence[str], seed: int, model: str | None = None) -> Recipe:
    """The recipe ``agentrl run`` trains for this arm and seed (with the laptop profile when it runs TinyAgent)."""
    values = {**parse_overrides(override_items), "train.seed": seed}
    return load_recipe(recipe, values, default_profile(recipe, model))


def budget(recipe: Recipe) -> dict[str, Any]:
    """What must match across arms for a fair comparison: sampled episodes, steps, updates and evaluation."""
    return {"train.steps": recipe.train.steps, "optim.updates_per_step": recipe.optim.updates_per_step,
            "rollout.group_size": recipe.rollout.group_size,
            "rollout.tasks_per_step": recipe.rollout.tasks_per_step, "rollout.max_turns": recipe.rollout.max_turns,
            "rollout.max_new_tokens_per_turn": recipe.rollout.max_new_tokens_per_turn,
            "train.eval_every": recipe.train.eval_every,
            "train.eval_episodes_per_task": recipe.train.eval_episodes_per_task,
            "environment": (recipe.environment.name, recipe.environment.options)}


def check_budgets(arms: Sequence[Arm], override_items: Sequence[str], model: str | None = None) -> dict[str, Any]:
    """The shared budget; an error naming the keys where two arms' recipes would sample differently."""
    budgets = {arm.recipe: budget(resolved_recipe(arm.recipe, override_items, 0, model)) for arm in arms}
    first, reference = next(iter(budgets.items()))
    for name, other in budgets.items():
        differ = [key for key in reference if reference[key] != other[key]]
        if differ:
            shown = ", ".join(f"{key}: {reference[key]} vs {other[key]}" for key in differ)
            raise AgentRLError(f"recipes {first!r} and {name!r} differ in their sample budget ({shown}); "
                               f"make them equal with -o, e.g. -o {differ[0]}={reference[differ[0]]}")
    return reference


def train_seed(env: FrameworkEnv, arm: Arm, seed: int, override_items: Sequence[str], run: RunDir,
               model: str | None = None) -> None:
    """``agentrl run`` for one arm and seed in the arm's environment, unless its report already exists."""
    if run.report_file.is_file():
        print(f"learning: {arm.label} seed {seed}: read back from {run.path}", file=sys.stderr, flush=True)
        return
    if run.path.exists():
        shutil.rmtree(run.path)
    command = [str(env.python), "-m", "agentrl_plugins", "run", arm.recipe, "--framework", arm.framework,
               "--seed", str(seed), "--out", str(run.path)]
    command += [part for item in override_items for part in ("-o", item)]
    command += ["--model", model] if model else []
    print(f"learning: {arm.label} seed {seed} in {env.python} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    done = subprocess.run(command, check=False, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0 or not run.report_file.is_file():
        raise FrameworkEnvError(f"{arm.label} seed {seed} failed (exit {done.returncode}): {' '.join(command)}")
    print(f"learning: {arm.label} seed {seed} done in {time.monotonic() - started:.0f} s", file=sys.stderr,
          flush=True)


def arm_summary(runs: dict[int, RunDir]) -> dict[str, Any]:
    """Start/end held-out pass@1 over seeds (``learning_summary``) plus per-step means of the other figures."""
    summary = learning_summary([seed_figures(seed, run) for seed, run in runs.items()])
    per_run = [run.read_metrics() for run in runs.values()]
    rows = [row for run_rows in per_run for row in run_rows if row.step > 0]
    for name in MEAN_FIGURES:
        values = [getattr(row, name) for row in rows if getattr(row, name) is not None]
        summary[name] = statistics.fmean(values) if values else None
    evaluated = [[r.heldout_hacked_fraction for r in run_rows if r.heldout_hacked_fraction is not None]
                 for run_rows in per_run]
    summary["start_heldout_hacked"] = statistics.fmean(values[0] for values in evaluated)
    summary["end_heldout_hacked"] = statistics.fmean(values[-1] for values in evaluated)
    summary["policy_tokens"] = sum(row.policy_tokens for row in rows)
    return summary


def flags(results: Sequence[ArmResult]) -> list[Flag]:
    """Pairs of arms whose mean end pass@1 differ by more than the larger of their seed spreads."""
    found = []
    for first, second in itertools.combinations(results, 2):
        difference = second.summary["end_mean"] - first.summary["end_mean"]
        spread = max(first.summary["end_spread"], second.summary["end_spread"])
        if abs(difference) > spread:
            found.append(Flag(first.arm, second.arm, difference, spread))
    return found


def run_learning(arms: Sequence[Arm], seeds: Sequence[int], override_items: Sequence[str], folder: Path,
                 model: str | None = None) -> list[ArmResult]:
    """Train every arm on every seed (or read the finished runs back) and summarise each arm."""
    if len(set(seeds)) < 2:
        raise AgentRLError(f"a seed spread needs at least two distinct seeds (got {list(seeds)})")
    check_budgets(arms, override_items, model)
    envs = {framework: find_env(framework) for framework in dict.fromkeys(arm.framework for arm in arms)}
    results = []
    for arm in arms:
        runs = {seed: RunDir(folder / arm.folder / f"seed{seed}") for seed in seeds}
        for seed, run in runs.items():
            train_seed(envs[arm.framework], arm, seed, override_items, run, model)
        results.append(ArmResult(arm, runs, arm_summary(runs)))
    return results


def mean_curves(result: ArmResult, field: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """Steps, mean, min and max over seeds of ``field`` where every seed has a value."""
    by_step: dict[int, list[float]] = {}
    for run in result.runs.values():
        for row in run.read_metrics():
            if getattr(row, field) is not None:
                by_step.setdefault(row.step, []).append(getattr(row, field))
    steps = sorted(step for step, values in by_step.items() if len(values) == len(result.runs))
    return (steps, [statistics.fmean(by_step[s]) for s in steps], [min(by_step[s]) for s in steps],
            [max(by_step[s]) for s in steps])

