"""What OpenRLHF's launch says of ``rollout.engine``: the stand-in named on the CPU backend, OpenRLHF's engines on
the GPU backend whatever the recipe names."""

from __future__ import annotations

from agentrl_plugins.recipe import load_recipe

from agentrl_openrlhf.config import CPU_STAND_IN, engine_notice, mappings


def test_vllm_on_the_cpu_backend_names_the_stand_in_and_the_mapping_row_says_so():
    recipe = load_recipe("deepswe_grpopp")
    assert CPU_STAND_IN in engine_notice(recipe, "cpu")
    assert engine_notice(recipe, "gpu") is None
    (row,) = [m for m in mappings(recipe) if m.key == "rollout.engine"]
    assert CPU_STAND_IN in row.note


def test_hf_on_the_gpu_backend_says_the_launch_samples_with_vllm():
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    assert engine_notice(recipe, "cpu") is None
    assert "samples with OpenRLHF's vLLM engines" in engine_notice(recipe, "gpu")
