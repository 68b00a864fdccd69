"""What verl's launch says of ``rollout.engine``: the stand-in named on a CPU, and 'hf' refused on a GPU."""

from __future__ import annotations

import pytest

from agentrl_plugins.errors import RecipeError
from agentrl_plugins.recipe import load_recipe

from agentrl_verl.config import CPU_STAND_IN, engine_notice, mappings


def test_vllm_on_a_cpu_names_the_stand_in_and_the_mapping_row_says_so():
    recipe = load_recipe("deepswe_grpopp")
    assert CPU_STAND_IN in engine_notice(recipe, on_cpu=True)
    assert engine_notice(recipe, on_cpu=False) is None
    (row,) = [m for m in mappings(recipe) if m.key == "rollout.engine"]
    assert CPU_STAND_IN in row.note


def test_hf_serves_a_cpu_only():
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    assert engine_notice(recipe, on_cpu=True) is None
    with pytest.raises(RecipeError, match="on a GPU set rollout.engine = 'vllm'"):
        engine_notice(recipe, on_cpu=False)
