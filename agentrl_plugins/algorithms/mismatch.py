"""How far the sampler's token probabilities are from the learner's: one step's mismatch figures.

With l the learner's log-prob of a sampled token before the update, s the sampler's and d = l - s, over the
step's loss tokens (the policy's tokens of the kept episodes, before any correction rejects one):

- ``mismatch_pearson``: the Pearson correlation of exp(l) and exp(s) (verl 0.9.1's
  ``training/rollout_actor_probs_pearson_corr``); None with fewer than two tokens or a constant side;
- ``mismatch_k3_kl``: the mean of exp(d) - d - 1 (verl's ``rollout_corr/k3_kl``, unclamped as there);
- ``mismatch_ppl_ratio``: the mean over sequences of exp(-mean_t d), the learner's perplexity over the
  sampler's (verl's ``rollout_corr/ppl_ratio``);
- ``mismatch_chi2_token``: the mean of exp(2 clamp(d, -20, 20)) - 1 (verl's ``rollout_corr/chi2_token``);
- ``mismatch_chi2_seq``: the mean over sequences of exp(2 clamp(sum_t d, -20, 20)) - 1 (``rollout_corr/chi2_seq``);
- ``mismatch_gap_max``: the largest |d| (verl's ``training/rollout_probs_diff_max`` is the largest gap of the
  probabilities, not of the log-probs).

Sequences are the rows with at least one loss token; verl's per-sequence means also count a row without one
(a compact-filtered episode), as a ratio of exactly 1. The figures come from additive sums
(:class:`MismatchSums`), so micro-batches and data-parallel ranks combine by adding them (or by averaging
them all alike, as verl averages a summed metric over ranks): the sums are kept in float64.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, fields

import torch
from torch import Tensor

from agentrl_plugins.algorithms.corrections import SAFETY_BOUND

MISMATCH_FIGURES = ("mismatch_pearson", "mismatch_k3_kl", "mismatch_ppl_ratio", "mismatch_chi2_token",
                    "mismatch_chi2_seq", "mismatch_gap_max")
"""The step's mismatch figures, as ``metrics.jsonl`` names them."""


@dataclass(frozen=True)
class MismatchSums:
    """Sums over loss tokens (and over sequences) from which the figures follow; ``gap_max`` combines by max."""

    tokens: float = 0.0
    sequences: float = 0.0
    learner_p: float = 0.0
    sampler_p: float = 0.0
    learner_p2: float = 0.0
    sampler_p2: float = 0.0
    cross_p: float = 0.0
    k3: float = 0.0
    rho2: float = 0.0
    seq_ppl_ratio: float = 0.0
    seq_rho2: float = 0.0
    gap_max: float = 0.0

    @classmethod
    def of(cls, learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor) -> MismatchSums:
        """The sums of [B, T] log-probs over ``mask`` (> 0: a loss token)."""
        with torch.no_grad():
            on = mask > 0
            learner = torch.where(on, learner_logp.detach().double(), 0.0)
            sampler = torch.where(on, sampler_logp.detach().double(), 0.0)
            d = learner - sampler
            count = on.sum(-1)
            rows = count > 0
            p = torch.where(on, learner.exp(), 0.0)
            q = torch.where(on, sampler.exp(), 0.0)
            mean_d = d.sum(-1)[rows] / count[rows]
            bounded = d.clamp(-SAFETY_BOUND, SAFETY_BOUND)
            seq_log_ratio = d.sum(-1)[rows].clamp(-SAFETY_BOUND, SAFETY_BOUND)
            values = torch.stack([
                on.sum().double(), rows.sum().double(), p.sum(), q.sum(), (p * p).sum(), (q * q).sum(),
                (p * q).sum(), torch.where(on, d.exp() - d - 1, 0.0).sum(),
                torch.where(on, (2 * bounded).exp(), 0.0).sum(), (-mean_d).exp().sum(), (2 * seq_log_ratio).exp().sum(),
                d.abs().max() if d.numel() else torch.zeros((), dtype=torch.float64),
            ])
        return cls(*values.tolist())

    def __add__(self, other: MismatchSums) -> MismatchSums:
        return MismatchSums(**{name: max(a, b) if name == "gap_max" else a + b
                               for name, a, b in zip(self.names(), astuple(self), astuple(other))})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def figures(self) -> dict[str, float | None]:
        """The figures of :data:`MISMATCH_FIGURES`; each None without a loss token (the correlation also
        without two of them or with a constant side)."""
        if self.tokens <= 0:
            return dict.fromkeys(MISMATCH_FIGURES)
        n = self.tokens
        covariance = n * self.cross_p - self.learner_p * self.sampler_p
        spread = (n * self.learner_p2 - self.learner_p ** 2) * (n * self.sampler_p2 - self.sampler_p ** 2)
        pearson = covariance / math.sqrt(spread) if n >= 2 and spread > 0 else None
        return {
            "mismatch_pearson": None if pearson is None else max(-1.0, min(1.0, pearson)),
            "mismatch_k3_kl": self.k3 / n,
            "mismatch_ppl_ratio": self.seq_ppl_ratio / self.sequences,
            "mismatch_chi2_token": self.rho2 / n - 1.0,
            "mismatch_chi2_seq": self.seq_rho2 / self.sequences - 1.0,
            "mismatch_gap_max": self.gap_max,
        }


def mismatch_figures(learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor) -> dict[str, float | None]:
    """The figures of one batch (:class:`MismatchSums` when the batch comes in parts)."""
    return MismatchSums.of(learner_logp, sampler_logp, mask).figures()
