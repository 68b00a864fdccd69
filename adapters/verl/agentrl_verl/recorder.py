"""The run folder of a verl run, step by step inside verl's trainer: ``metrics.jsonl``, the hook, the loggers.

:class:`StepRecorder` is what :class:`~agentrl_verl.verl_plugin.trainer.AgentRLTrainer` calls: after each step
(and after the evaluation before the first) it appends verl's metrics of the step to ``verl_metrics.jsonl``,
makes the step's row from the episodes the agent loop logged (``episodes.py``) and those metrics, appends it
to ``metrics.jsonl``, calls ``agentrl_step_end`` and returns the ``agentrl/`` figures that verl's own loggers
(``trainer.logger``) then log with the step. Rewards, hacks, filtering and loss tokens come from the episodes;
clip fraction, entropy (the trainer's mean over loss tokens, :data:`ENTROPY_KEY`), the correction's capped or rejected
fraction (:func:`~agentrl_verl.config.limited_fraction_key`), the sampler/learner mismatch
(:mod:`agentrl_verl.mismatch`) and the step time from verl's metrics. Held-out
pass@1 is the mean verdict of the held-out episodes run on that step's weights.
"""

from __future__ import annotations

import numbers
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import EpisodeCounts, episode_figures
from agentrl_plugins.runs.journal import append_line, read_lines, rewrite_lines
from agentrl_plugins.runs.metrics import StepMetrics, finite, logged_figures
from agentrl_plugins.runs.progress import record_step
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.config import limited_fraction_key
from agentrl_verl.episodes import EPISODES_FILE, EpisodeRecord, played_seconds, read_episodes, truncate_episodes
from agentrl_verl.final_weights import save_final_weights
from agentrl_verl.mismatch import figures_of

VERL_METRICS_FILE = "verl_metrics.jsonl"
ENTROPY_KEY = "actor/agentrl/token_mean_entropy"
"""The recording trainer's entropy figure: the mean over the step's loss tokens, whatever the aggregation."""


def verl_metrics(path: Path) -> dict[int, dict[str, Any]]:
    """verl's logged metrics by step (later lines of a step, e.g. after a resume, win)."""
    steps: dict[int, dict[str, Any]] = defaultdict(dict)
    for row in read_lines(path):
        steps[int(row["step"])].update(row["data"])
    return dict(steps)


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def step_rows(episodes: list[EpisodeRecord], metrics: dict[int, dict[str, Any]], recipe: Recipe) -> list[StepMetrics]:
    """One row per trained step, plus step 0 when the starting policy was evaluated."""
    limited_key = limited_fraction_key(recipe)
    train, held_out = defaultdict(list), defaultdict(list)
    for episode in episodes:
        if episode.split == "train":
            train[episode.weights_version + 1].append(episode)
        else:
            held_out[episode.weights_version].append(episode)
    rows = []
    for step in sorted(set(train) | ({0} & set(held_out))):
        batch, evaluated, verl = train.get(step, []), held_out.get(step, []), metrics.get(step, {})
        capped = 0.0 if recipe.correction.name == "none" else verl.get(limited_key) if limited_key else None
        rows.append(StepMetrics(
            step=step,
            train_reward=mean(e.reward for e in batch),
            heldout_pass1=mean(float(e.passed) for e in evaluated),
            heldout_hacked_fraction=mean(float(e.hacked) for e in evaluated),
            hacked_fraction=mean(float(e.hacked) for e in batch),
            filtered_fraction=mean(float(e.filtered) for e in batch),
            clip_fraction=finite(verl.get("actor/pg_clipfrac")),
            is_capped_fraction=finite(capped),
            entropy=finite(verl.get(ENTROPY_KEY)),
            policy_tokens=sum(e.policy_tokens for e in batch),
            seconds=finite(verl.get("timing_s/step")) or 0.0,
            rollout_seconds=finite(verl.get("timing_s/gen")),
            eval_seconds=(finite(verl.get("timing_s/testing")) or played_seconds(evaluated)) if evaluated else None,
            **episode_figures([EpisodeCounts(e.passed, e.sampled_policy_tokens, e.redundant, e.drift, e.teacher_gap,
                                          e.teacher_tokens, e.teacher_seconds) for e in batch]),
            **(figures_of(verl) if batch else {}),
        ))
    return rows


def scalars(data: dict[str, Any]) -> dict[str, float]:
    """The numbers among verl's metrics of a step (what its file logger would keep)."""
    return {key: float(value) for key, value in data.items()
            if isinstance(value, numbers.Real) or getattr(value, "ndim", None) == 0}


class StepRecorder:
    """Records one agentrl run inside verl's trainer; its run folder holds the recipe file verl's config names."""

    def __init__(self, run: RunDir, recipe: Recipe, hooks: Any = None):
        self.run, self.recipe = run, recipe
        self.hooks = hooks if hooks is not None else get_plugin_manager().hook

    @classmethod
    def for_recipe_file(cls, recipe_file: Path) -> StepRecorder:
        """The recorder of the run folder ``recipe_file`` is in; a clear error when it is not a run folder."""
        run = RunDir(recipe_file.parent)
        if not run.run_file.is_file():
            raise AgentRLError(f"{recipe_file} is not in a run folder (no {run.run_file.name} beside it): write one "
                               f"with `agentrl verl prepare RECIPE --run-dir DIR` and name DIR/recipe.toml")
        return cls(run, run.load_recipe())

    @property
    def episodes_file(self) -> Path:
        return self.run.path / EPISODES_FILE

    @property
    def verl_metrics_file(self) -> Path:
        return self.run.path / VERL_METRICS_FILE

    def record(self, step: int, data: dict[str, Any]) -> dict[str, float]:
        """Record step ``step`` from verl's metrics ``data``; returns the agentrl figures to log with them."""
        append_line(self.verl_metrics_file, {"step": step, "data": scalars(data)})
        rows = step_rows(read_episodes(self.episodes_file), verl_metrics(self.verl_metrics_file), self.recipe)
        row = next((row for row in rows if row.step == step), None)
        if row is None:
            print(f"agentrl: step {step} has no logged episode, so no metrics row (the agent loop logs to "
                  f"{self.episodes_file})", file=sys.stderr, flush=True)
            return {}
        record_step(self.run, row, self.hooks)
        return logged_figures(row)

    def resume_from(self, step: int) -> None:
        """Drop what a resume from step ``step``'s checkpoint runs again (verl evaluates that step's weights
        again before it continues, so their evaluation goes too)."""
        truncate_episodes(self.episodes_file, step)
        self.run.truncate_metrics(step - 1)
        kept = {s: data for s, data in verl_metrics(self.verl_metrics_file).items() if s <= step}
        rewrite_lines(self.verl_metrics_file, [{"step": s, "data": data} for s, data in sorted(kept.items())])

    def finish(self, checkpoints: Path | None) -> Path:
        """After the last step: the last checkpoint as ``final/`` (when verl saved one) and the report."""
        if checkpoints is not None:
            save_final_weights(self.run, checkpoints)
        report = write_report(self.run)
        print(f"run folder: {self.run.path}\nreport: {report}", file=sys.stderr, flush=True)
        return report
