"""The sampler/learner mismatch figures against an independent NumPy reference, their sums, and the recipe's gate."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import operator
import warnings

import numpy as np
import pytest
import torch

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES, MismatchSums, mismatch_figures
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.mismatch_gate import MismatchGateError, MismatchWarning
from agentrl_plugins.runs.progress import record_step
from agentrl_plugins.runs.rundir import RunDir

MANAGER = PluginManager(load_entry_points=False)


def reference(learner: np.ndarray, sampler: np.ndarray, mask: np.ndarray) -> dict[str, float | None]:
    """The definitions written out row by row, in float64, without the sums."""
    tokens, seq_ratio, seq_rho2 = [], [], []
    for l_row, s_row, m_row in zip(learner, sampler, mask):
        on = m_row > 0
        if not on.any():
            continue
        d = l_row[on] - s_row[on]
        tokens.extend(zip(np.exp(l_row[on]), np.exp(s_row[on]), d))
        seq_ratio.append(math.exp(-d.mean()))
        seq_rho2.append(math.exp(2 * min(max(d.sum(), -20.0), 20.0)))
    if not tokens:
        return dict.fromkeys(MISMATCH_FIGURES)
    p, q, d = (np.array(column) for column in zip(*tokens))
    pearson = float(np.corrcoef(p, q)[0, 1]) if len(p) > 1 and p.std() > 0 and q.std() > 0 else None
    return {"mismatch_pearson": pearson, "mismatch_k3_kl": float(np.mean(np.exp(d) - d - 1)),
            "mismatch_ppl_ratio": float(np.mean(seq_ratio)),
            "mismatch_chi2_token": float(np.mean(np.exp(2 * np.clip(d, -20, 20))) - 1),
            "mismatch_chi2_seq": float(np.mean(seq_rho2)) - 1, "mismatch_gap_max": float(np.abs(d).max())}


def random_batch(seed: int, rows: int = 6, width: int = 11, scale: float = 0.3):
    rng = np.random.default_rng(seed)
    learner = -rng.exponential(1.5, (rows, width))
    sampler = np.minimum(learner + rng.normal(0, scale, (rows, width)), 0.0)
    mask = (rng.random((rows, width)) < 0.7).astype(float)
    mask[rng.integers(rows)] = 0.0  # a compact-filtered row
    padding = rng.choice([0.0, np.nan, np.inf, -np.inf], (rows, width))
    return np.where(mask > 0, learner, padding), np.where(mask > 0, sampler, padding), mask


def close(a: dict, b: dict, tol: float) -> bool:
    return all((a[k] is None) == (b[k] is None) and (a[k] is None or abs(a[k] - b[k]) <= tol * max(1, abs(b[k])))
               for k in MISMATCH_FIGURES)


@pytest.mark.parametrize("seed", range(200))
def test_figures_equal_the_definitions_with_any_padding(seed):
    learner, sampler, mask = random_batch(seed, scale=[0.01, 0.3, 3.0][seed % 3])
    figures = mismatch_figures(*(torch.tensor(a) for a in (learner, sampler, mask)))
    assert close(figures, reference(learner, sampler, mask), 1e-10), figures


def test_sums_add_over_any_split_and_ignore_a_uniform_scale():
    learner, sampler, mask = (torch.tensor(a) for a in random_batch(7, rows=9, width=13))
    whole = MismatchSums.of(learner, sampler, mask)
    for cut in ([0, 9], [0, 3, 9], [0, 1, 2, 5, 9]):
        parts = [MismatchSums.of(learner[a:b], sampler[a:b], mask[a:b]) for a, b in zip(cut, cut[1:])]
        assert close(functools.reduce(operator.add, parts).figures(), whole.figures(), 1e-12)
    halved = MismatchSums(*(v / 2 for v in dataclasses.astuple(whole)[:-1]), whole.gap_max)
    assert close(halved.figures(), whole.figures(), 1e-12), "verl averages summed metrics over ranks"


def test_identical_sides_give_perfect_figures_and_empty_ones_none():
    learner, _, mask = (torch.tensor(a) for a in random_batch(3))
    same = mismatch_figures(learner, learner.clone(), mask)
    assert same["mismatch_pearson"] == pytest.approx(1.0, abs=1e-12)
    assert same["mismatch_k3_kl"] == same["mismatch_gap_max"] == 0.0
    assert same["mismatch_ppl_ratio"] == 1.0 and same["mismatch_chi2_token"] == same["mismatch_chi2_seq"] == 0.0
    assert mismatch_figures(learner, learner, torch.zeros_like(mask)) == dict.fromkeys(MISMATCH_FIGURES)
    one = torch.zeros_like(mask)
    one[0, 0] = 1
    figures = mismatch_figures(learner - 0.5, learner, one)
    assert figures["mismatch_pearson"] is None and figures["mismatch_gap_max"] == pytest.approx(0.5)


def test_a_large_gap_is_bounded_where_verl_bounds_it():
    learner = torch.tensor([[-0.1, -0.2]], dtype=torch.float64)
    sampler = torch.tensor([[-40.0, -0.2]], dtype=torch.float64)
    figures = mismatch_figures(learner, sampler, torch.ones_like(learner))
    assert figures["mismatch_chi2_token"] == pytest.approx((math.exp(40) + 1) / 2 - 1)
    assert math.isfinite(figures["mismatch_chi2_seq"]) and figures["mismatch_gap_max"] == pytest.approx(39.9)


def gated_run(tmp_path, gate: str) -> RunDir:
    recipe = load_recipe("deepswe_grpopp", {"mismatch.gate": gate, "mismatch.min_pearson": 0.995}, "laptop",
                         plugin_manager=MANAGER)
    run = RunDir(tmp_path / gate)
    run.create(recipe, "trl")
    return run


def step(pearson: float | None) -> StepMetrics:
    return StepMetrics(4, 0.5, None, None, 0.0, 0.0, 0.0, 0.0, 1.0, 10, 1.0, mismatch_pearson=pearson,
                       mismatch_k3_kl=0.02, mismatch_gap_max=1.5)


def test_the_gate_warns_with_the_step_and_the_figure(tmp_path):
    run = gated_run(tmp_path, "warn")
    with pytest.warns(MismatchWarning, match=r"step 4: .* 0\.980000, below mismatch.min_pearson = 0.995"):
        record_step(run, step(0.98), MANAGER.hook)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record_step(run, step(0.996), MANAGER.hook)
        record_step(run, step(None), MANAGER.hook)
    assert len(run.read_metrics()) == 3


def test_the_stop_gate_ends_the_run_and_keeps_the_row(tmp_path):
    run = gated_run(tmp_path, "stop")
    with pytest.raises(MismatchGateError, match=r"step 4: .*0\.900000.*the step's row is kept"):
        record_step(run, step(0.9), MANAGER.hook)
    assert json.loads(run.metrics_file.read_text())["mismatch_pearson"] == 0.9


def test_the_off_gate_records_without_a_word(tmp_path):
    run = gated_run(tmp_path, "off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record_step(run, step(0.1), MANAGER.hook)
    assert run.read_metrics()[0].mismatch_pearson == 0.1


@pytest.mark.parametrize(("key", "value", "message"), [
    ("mismatch.min_pearson", 1.5, "in \\[-1, 1\\]"), ("mismatch.min_pearson", float("nan"), "in \\[-1, 1\\]"),
    ("mismatch.gate", "stopp", "stop"),
])
def test_bad_gate_settings_are_refused_by_name(key, value, message):
    with pytest.raises(RecipeError, match=f"{key}.*{message}|{message}.*{key}"):
        load_recipe("deepswe_grpopp", {key: value}, plugin_manager=MANAGER)
