"""OpenRLHF's side of ``agentrl compare --parity``: its own CLI, estimator and ``PolicyLoss`` vs the core reference.

Each case runs ``python -m agentrl_openrlhf.parity`` in a subprocess of this environment, as
``agentrl compare`` does: the side installs the runtime-env hook's patches on OpenRLHF's
classes, which must not leak into the other tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentrl_plugins.compare.batch import write_input
from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.runner import FrameworkEnv, run_side
from agentrl_plugins.compare.table import parity_table
from agentrl_plugins.recipe import load_recipe

HERE = FrameworkEnv("openrlhf", Path(sys.executable), "this test's environment")
VARIANTS = [
    ("deepswe_grpopp", {}),
    ("deepswe_grpopp", {"loss.aggregation": "token-mean", "correction.name": "token_tis", "correction.cap": 1.5}),
    ("grpo", {"correction.name": "icepop", "correction.low": 0.5, "correction.high": 2.0}),
    ("deepswe_grpopp", {"loss.entropy_coef": 0.01}),
    ("gspo", {"loss.clip_low": 0.02, "loss.clip_high": 0.03}),
    ("cispo", {"loss.clip_high": 0.1, "correction.name": "icepop", "correction.low": 0.5, "correction.high": 2.0}),
    ("gigpo", {"advantage.gamma": 0.5, "filtering.compact": True, "loss.aggregation": "seq-mean-token-sum"}),
]


@pytest.fixture(scope="module")
def batch():
    return record_batch(load_recipe("deepswe_grpopp"), seed=0)


def side(tmp_path, recipe, batch):
    return run_side(HERE, write_input(tmp_path / "in.json", recipe, batch), tmp_path / "out.json")


@pytest.mark.parametrize("name, overrides", VARIANTS)
def test_openrlhf_computes_the_core_numbers(tmp_path, batch, name, overrides):
    recipe = load_recipe(name, overrides)
    result = side(tmp_path, recipe, batch)
    table = parity_table(recipe, batch, [result])
    assert not table.mismatches, table.mismatches
    assert not table.differences and not table.figure_differences
    unreported = [] if recipe.loss.entropy_coef else ["figure entropy"]
    assert [row.quantity for row in table.unreported] == unreported, "OpenRLHF logs entropy only with a coefficient"
    statuses = {row["key"]: row["status"] for row in result.mapping}
    if recipe.correction.name == "token_tis":
        assert statuses["loss.aggregation"] == statuses["correction.name"] == "native"
        assert (result.weights[batch.response_mask.bool() & (result.weights > 0)] < 1.5 + 1e-12).all()


def test_a_changed_upper_clip_reaching_openrlhf_is_reported(tmp_path, batch):
    recipe = load_recipe("deepswe_grpopp")
    wrong = side(tmp_path, load_recipe("deepswe_grpopp", {"loss.clip_high": 0.3}), batch)
    table = parity_table(recipe, batch, [wrong])
    assert {row.quantity for row in table.mismatches} == {"loss", "gradient", "gradient norm", "figure clip_fraction"}
