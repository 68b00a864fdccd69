"""One row of ``metrics.jsonl`` per training step, the same for every framework."""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class StepMetrics:
    """The figures every run reports after each step, with one definition in every framework.

    Held-out figures are None between evaluations; step 0 is the starting policy, evaluated
    before any update, so its training figures are None. Over the step's training episodes:
    ``train_reward`` (mean verifier reward), ``hacked_fraction`` and ``filtered_fraction`` (episodes
    compact-filtered out of the loss). Over the step's loss tokens (the policy's tokens of the kept
    episodes, a correction's rejected tokens included): ``clip_fraction`` (tokens where the PPO clip
    binds: the ratio below 1 - clip_low where A < 0, or above 1 + clip_high where A > 0),
    ``is_capped_fraction`` (tokens whose correction weight was capped or rejected), ``entropy`` (the policy's
    mean per-token entropy) and ``policy_tokens`` (their count). The parity check holds each adapter's figures to these
    definitions (:mod:`agentrl_plugins.runs.figures`). Over the step's training episodes again, filtered
    ones included (:func:`~agentrl_plugins.runs.figures.episode_figures`): the mean policy tokens of the
    honest successes (``success_tokens``) and of the other episodes (``failure_tokens``), and the mean
    number of redundant turns per honest success (``redundant_per_success``), and the mean number of times per
    episode an agent program's conversation stopped extending the tokens sampled before (``drift_per_episode``,
    :mod:`agentrl_plugins.gateway`; 0 for the episode runner's episodes), and with a distillation teacher its
    per-token reverse KL estimate, the mean ``log p_sampler - log p_teacher`` over the scored policy tokens
    (``teacher_kl``) and the wall time of the teacher's forwards that scored them (``teacher_seconds``, to set
    against ``rollout_seconds``, which includes it); each None without such an episode (and in rows written before
    they existed).

    The sampler/learner mismatch over the step's loss tokens (``mismatch_*``,
    :mod:`agentrl_plugins.algorithms.mismatch`): None where the step did not measure it.

    Time, the same in every framework: ``seconds`` is the training step's wall time, its rollout and its update,
    without any evaluation (0 at step 0); ``rollout_seconds`` the part of it until the step's episodes were
    played and scored; ``eval_seconds`` the held-out evaluation this row reports (None without one; verl does not
    time its validation before training, so its step 0 has the span of its evaluation episodes).
    """

    step: int
    train_reward: float | None
    heldout_pass1: float | None
    heldout_hacked_fraction: float | None
    hacked_fraction: float | None
    filtered_fraction: float | None
    clip_fraction: float | None
    is_capped_fraction: float | None
    entropy: float | None
    policy_tokens: int
    seconds: float
    success_tokens: float | None = None
    failure_tokens: float | None = None
    redundant_per_success: float | None = None
    drift_per_episode: float | None = None
    teacher_kl: float | None = None
    teacher_seconds: float | None = None
    rollout_seconds: float | None = None
    eval_seconds: float | None = None
    mismatch_pearson: float | None = None
    mismatch_k3_kl: float | None = None
    mismatch_ppl_ratio: float | None = None
    mismatch_chi2_token: float | None = None
    mismatch_chi2_seq: float | None = None
    mismatch_gap_max: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict) -> StepMetrics:
        return cls(**{f.name: row[f.name] if f.default is MISSING else row.get(f.name, f.default)
                      for f in fields(cls)})


METRIC_NAMES = tuple(f.name for f in fields(StepMetrics))
TIMING_NAMES = ("seconds", "rollout_seconds", "eval_seconds")
"""The row's wall-clock figures: the ones two runs of one recipe and seed do not share."""


def without_timing(row: StepMetrics) -> StepMetrics:
    """``row`` with its wall-clock figures zeroed, to compare runs."""
    return StepMetrics.from_dict({**row.to_dict(), **dict.fromkeys(TIMING_NAMES, 0.0)})


def finite(value: Any) -> float | None:
    """A framework's figure as a row value: a finite float, or None for a missing or NaN one (a framework
    reports NaN for a mean over no tokens)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


LOGGED_PREFIX = "agentrl/"


def logged_figures(row: StepMetrics) -> dict[str, float]:
    """The row as the scalars every framework's logger receives (TensorBoard, W&B, ...): each figure the row
    has as ``agentrl/<name>``, and for a training step ``agentrl/no_gradient`` (1.0 when no loss token was left)."""
    figures = {f"{LOGGED_PREFIX}{name}": float(value) for name, value in row.to_dict().items()
               if name != "step" and value is not None}
    if row.train_reward is not None:
        figures[f"{LOGGED_PREFIX}no_gradient"] = float(row.policy_tokens == 0)
    return figures
