"""On-policy distillation's per-token signal: the reverse KL to the teacher on each token the student sampled.

A policy token gets ``-coef * (log p_sampler - log p_teacher)``: the one-sample (k1) estimate of the reverse KL
KL(student || teacher) at that token, as an advantage, as the Tinker cookbook's on-policy distillation adds it
(``kl_penalty_coef``, default 1, no discount over later tokens). Observation and tool tokens get nothing; they
stay in the teacher's context. The values travel with each row (``TurnRecord.token_values``) into every
framework's advantage step, where :func:`dense_advantages` places them.
"""

from __future__ import annotations

from typing import Sequence

from torch import Tensor


def reverse_kl_signal(sampler_logprobs: Sequence[float], teacher_logprobs: Sequence[float], mask: Sequence[int],
                      coef: float) -> list[float]:
    """Per response token: ``-coef * (sampler - teacher)`` on the policy's tokens (``mask`` 1), 0 elsewhere."""
    if not len(sampler_logprobs) == len(teacher_logprobs) == len(mask):
        raise ValueError(f"{len(sampler_logprobs)} sampler log-probs, {len(teacher_logprobs)} teacher log-probs and "
                         f"{len(mask)} mask entries: one each per response token")
    return [-coef * (s - t) if m else 0.0 for s, t, m in zip(sampler_logprobs, teacher_logprobs, mask)]


def dense_advantages(values: Sequence[Sequence[float]], spans: Sequence[Sequence[tuple[int, int]]],
                     like: Tensor) -> Tensor:
    """Per-policy-token values (each row's, in the order of its spans) as a tensor of ``like``'s [B, T] shape and
    dtype: placed on the spans' tokens, 0 elsewhere."""
    dense = like.new_zeros(like.shape)
    for row, (row_values, row_spans) in enumerate(zip(values, spans, strict=True)):
        positions = [index for start, end in row_spans for index in range(start, end)]
        if len(positions) != len(row_values):
            raise ValueError(f"row {row}: {len(row_values)} per-token values for {len(positions)} policy tokens")
        if positions:
            if positions[-1] >= dense.size(1):
                raise ValueError(f"row {row}: its policy tokens reach {positions[-1] + 1}, past the width "
                                 f"{dense.size(1)}")
            dense[row, positions] = like.new_tensor(list(row_values))
    return dense
