"""The mismatch figures against verl 0.9.1's own: ``compute_offpolicy_metrics`` (k3 KL, perplexity ratio, chi-squared)
and ``calculate_debug_metrics`` (the probabilities' Pearson correlation), and the sums through verl's metric
aggregation over micro-batches and ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.ppo.rollout_corr_helper import compute_offpolicy_metrics
from verl.utils.debug.metrics import calculate_debug_metrics
from verl.utils.metric import AggregationType, Metric

from agentrl_plugins.algorithms.mismatch import MismatchSums, mismatch_figures

from agentrl_verl.mismatch import LOGGED_KEY, driver_metrics, figures_of

VERL_NAMES = {"mismatch_k3_kl": "k3_kl", "mismatch_ppl_ratio": "ppl_ratio", "mismatch_chi2_token": "chi2_token",
              "mismatch_chi2_seq": "chi2_seq"}


def batch(seed: int, rows: int = 8, width: int = 24, scale: float = 0.2):
    generator = torch.Generator().manual_seed(seed)
    learner = -torch.rand(rows, width, generator=generator) * 4
    sampler = (learner + scale * torch.randn(rows, width, generator=generator)).clamp(max=0)
    mask = (torch.rand(rows, width, generator=generator) < 0.8).float()
    mask[:, 0] = 1.0  # every row has a loss token
    return learner, sampler, mask


def verl_figures(learner, sampler, mask) -> dict[str, float]:
    own = compute_offpolicy_metrics(learner, sampler, mask)
    data = DataProto.from_single_dict({"old_log_probs": learner, "rollout_log_probs": sampler, "response_mask": mask,
                                       "responses": torch.zeros_like(mask, dtype=torch.long)})
    debug = calculate_debug_metrics(data)
    return {**{ours: own[theirs] for ours, theirs in VERL_NAMES.items()},
            "mismatch_pearson": debug["training/rollout_actor_probs_pearson_corr"]}


@pytest.mark.parametrize("seed", range(20))
def test_the_figures_are_verls_on_verls_float32_inputs(seed):
    learner, sampler, mask = batch(seed, scale=[0.01, 0.2, 1.0][seed % 3])
    ours, theirs = mismatch_figures(learner, sampler, mask), verl_figures(learner, sampler, mask)
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value, rel=1e-6, abs=1e-6), name


def test_a_row_without_loss_tokens_counts_in_verls_sequence_means_only():
    """A compact-filtered row: verl's per-sequence means take it as a ratio of 1; the core's leave it out."""
    learner, sampler, mask = batch(3)
    mask[5] = 0.0
    ours, theirs = mismatch_figures(learner, sampler, mask), verl_figures(learner, sampler, mask)
    kept = int((mask.sum(-1) > 0).sum())
    assert theirs["mismatch_ppl_ratio"] == pytest.approx((ours["mismatch_ppl_ratio"] * kept + 1) / (kept + 1), rel=1e-6)
    assert theirs["mismatch_chi2_seq"] + 1 == pytest.approx((ours["mismatch_chi2_seq"] + 1) * kept / (kept + 1) + 1 /
                                                            (kept + 1), rel=1e-6)
    assert ours["mismatch_k3_kl"] == pytest.approx(theirs["mismatch_k3_kl"], rel=1e-6)


def test_the_sums_survive_verls_aggregation_over_micro_batches_and_ranks():
    """Two ranks of two micro-batches each, as the on-policy update logs them: verl adds ``SUM`` metrics over a
    rank's micro-batches and averages them over ranks; the recorder's figures are the whole batch's."""
    learner, sampler, mask = (t.double() for t in batch(11, rows=8))
    ranks = [[slice(0, 2), slice(2, 4)], [slice(4, 6), slice(6, 8)]]
    per_rank = []
    for micro_batches in ranks:
        metrics: dict[str, Metric] = {}
        for rows in micro_batches:
            sums = MismatchSums.of(learner[rows], sampler[rows], mask[rows])
            for name in MismatchSums.names():
                aggregation = AggregationType.MAX if name == "gap_max" else AggregationType.SUM
                metrics.setdefault(name, Metric(aggregation)).append(getattr(sums, name))
        per_rank.append(metrics)
    logged = {LOGGED_KEY + name: Metric.aggregate_dp([rank[name] for rank in per_rank])
              for name in MismatchSums.names()}
    whole = mismatch_figures(learner, sampler, mask)
    assert figures_of(logged) == pytest.approx(whole, rel=1e-12)
    assert logged[LOGGED_KEY + "tokens"] == pytest.approx(mask.sum().item() / 2), "a mean over the two ranks"
    assert figures_of(driver_metrics(MismatchSums.of(learner, sampler, mask))) == pytest.approx(whole, rel=1e-12)
    assert set(figures_of({}).values()) == {None}


def test_near_equal_sides_keep_the_correlation_verls_float32_rounds():
    """The engine's numerics against the learner's (gaps near 1e-6): the core's float64 sums give the correlation
    of the float32 inputs to 1e-12; verl's float32 ``corrcoef`` rounds it by about 1e-7."""
    learner, _, mask = batch(5, rows=64, width=256)
    sampler = learner + 1e-6 * torch.from_numpy(np.random.default_rng(0).standard_normal(learner.shape)).float()
    on = mask.bool()
    exact = np.corrcoef(learner[on].double().exp().numpy(), sampler[on].double().exp().numpy())[0, 1]
    ours, theirs = mismatch_figures(learner, sampler, mask), verl_figures(learner, sampler, mask)
    assert ours["mismatch_pearson"] == pytest.approx(exact, abs=1e-12)
    assert theirs["mismatch_pearson"] == pytest.approx(exact, abs=1e-6)
