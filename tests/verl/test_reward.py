"""``pkg://agentrl_verl.reward`` loaded by verl's own reward-function loader, with the run folder's recipe file."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf
from verl.trainer.ppo.reward import get_custom_reward_fn

from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import write_recipe_file

from bugfix_gym import policies
from bugfix_gym.families import FAMILIES

FAMILY = {family.name: family for family in FAMILIES}


def reward_fn(verifier_names: list[str], folder: Path):
    recipe_file = write_recipe_file(folder / f"{'-'.join(verifier_names)}.toml",
                                    load_recipe("grpo", {"verifier.names": verifier_names}))
    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://agentrl_verl.reward", "name": "compute_score",
        "reward_kwargs": {"recipe": str(recipe_file)}}}})
    return get_custom_reward_fn(config)


def score(fn, family: str, messages: list[str]) -> dict:
    return fn(data_source="agentrl/bugfix", solution_str="\n".join(messages), ground_truth=family,
              extra_info={"environment": "bugfix", "task_id": family})


def test_a_replayed_fix_scores_one_and_a_hack_only_fools_the_public_tests(tmp_path):
    hidden, public = reward_fn(["hidden_tests"], tmp_path), reward_fn(["public_tests"], tmp_path)
    assert score(hidden, "clamp", policies.solver(FAMILY["clamp"])) == {"score": 1.0, "passed": 1.0, "hacked": 0.0}
    hack = policies.hacker(FAMILY["clamp"])
    assert score(hidden, "clamp", hack)["score"] == 0.0 and score(hidden, "clamp", hack)["hacked"] == 1.0
    assert score(public, "clamp", hack)["score"] == 1.0


def test_text_that_never_submits_scores_zero(tmp_path):
    text = ["I would swap min and max.", "<tool>read</tool>"]
    assert score(reward_fn(["hidden_tests"], tmp_path), "span", text)["score"] == 0.0
