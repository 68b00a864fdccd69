"""The run folder from inside TRL's training loop: one ``metrics.jsonl`` row per step, the report at the end,
and the agentrl figures in TRL's own logs (so every ``report_to`` logger receives them)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from transformers import TrainerCallback

from agentrl_plugins.algorithms.mismatch import MismatchSums
from agentrl_plugins.runs.evaluate import Evaluation
from agentrl_plugins.runs.figures import EPISODE_FIGURES
from agentrl_plugins.runs.metrics import StepMetrics, logged_figures
from agentrl_plugins.runs.progress import record_step
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir


class RunRecorder(TrainerCallback):
    """Records each step at TRL's ``on_step_end`` of its last update, before the step is logged and checkpointed.

    A step is ``num_iterations`` of TRL's updates (``optim.updates_per_step``; TRL's ``global_step`` counts
    updates). The held-out evaluation runs every ``eval_every`` steps and at the last; its time is the row's
    ``eval_seconds``, not in the step's ``seconds``. The row's figures are added to the trainer's metrics,
    which TRL averages over the step's updates into the step's log.
    """

    def __init__(self, run: RunDir, evaluate: Callable[[int], Evaluation], eval_every: int, hooks: Any,
                 on_end: Callable[[], None] = lambda: None):
        self.run, self.evaluate, self.eval_every, self.hooks, self.on_end = run, evaluate, eval_every, hooks, on_end
        self.trainer: Any = None
        self.started = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self.run.truncate_metrics(state.global_step // args.num_iterations)
        if state.global_step == 0:
            started = time.monotonic()
            evaluation = self.evaluate(0)
            row = StepMetrics(0, None, evaluation.pass_at_1, evaluation.hacked_fraction, None, None, None, None,
                              None, 0, 0.0, eval_seconds=time.monotonic() - started)
            record_step(self.run, row, self.hooks)
            self.trainer.log(logged_figures(row))

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step % args.num_iterations == 0:  # the step's first update
            self.started = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % args.num_iterations:  # not the step's last update
            return
        seconds = time.monotonic() - self.started
        step = state.global_step // args.num_iterations
        started = time.monotonic()
        last = state.global_step == state.max_steps
        evaluation = self.evaluate(step) if step % self.eval_every == 0 or last else None
        trl_metrics = self.trainer._metrics["train"]
        row = StepMetrics(
            step=step,
            heldout_pass1=evaluation.pass_at_1 if evaluation else None,
            heldout_hacked_fraction=evaluation.hacked_fraction if evaluation else None,
            seconds=seconds,
            rollout_seconds=self.trainer.step_stats["rollout_seconds"],
            eval_seconds=time.monotonic() - started if evaluation else None,
            **step_figures(trl_metrics, self.trainer.step_stats, self.trainer.mismatch),
        )
        record_step(self.run, row, self.hooks)
        for name, value in logged_figures(row).items():
            trl_metrics[name] = [value]

    def on_train_end(self, args, state, control, **kwargs):
        self.on_end()
        write_report(self.run)


CLIP_METRICS = ("clip_ratio/region_mean", "cispo_clip_ratio")
"""TRL's clip figure: the clip region of its clipped losses, or the capped weights of its cispo loss."""


def step_figures(trl_metrics: dict[str, list[float]], stats: dict[str, Any], mismatch: MismatchSums) -> dict[str, Any]:
    """A step's figures (:data:`~agentrl_plugins.runs.figures.FIGURES`) from TRL's logged metrics (a value per
    micro-batch of each of the step's updates: TRL's clip region, or its cispo loss's capped weights, and its
    entropy, each a mean over that micro-batch's loss tokens), the trainer's step statistics (the episode
    figures among them) and its mismatch sums."""
    clip = next((trl_metrics[key] for key in CLIP_METRICS if trl_metrics.get(key)), None)
    return {
        "train_reward": stats["train_reward"],
        "hacked_fraction": stats["hacked_fraction"],
        "filtered_fraction": stats["filtered_fraction"],
        "clip_fraction": _mean(clip) or 0.0,
        "is_capped_fraction": stats["is_capped_fraction"],
        "entropy": _mean(trl_metrics.get("entropy")),
        "policy_tokens": stats["policy_tokens"],
        **{name: stats[name] for name in EPISODE_FIGURES},
        **mismatch.figures(),
    }


def _mean(values: list[float] | None) -> float | None:
    return statistics.fmean(values) if values else None
