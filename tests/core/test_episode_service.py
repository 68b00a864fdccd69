"""The episode service: what a recipe decides about its episodes, set up once for every adapter."""

from __future__ import annotations

import asyncio

import pytest

from agentrl_plugins.episode_service import EpisodeService, grouped
from agentrl_plugins.errors import RecipeError, UnknownNameError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling

from bugfix_gym import policies
from bugfix_gym.families import FAMILIES

CLAMP = next(family for family in FAMILIES if family.name == "clamp")


@pytest.fixture
def service():
    made = EpisodeService.from_recipe(load_recipe("deepswe_grpopp", {
        "rollout.max_turns": 6, "rollout.max_context_tokens": 4096, "rollout.max_new_tokens_per_turn": 64,
        "rollout.timeout_s": 60.0}))
    yield made
    made.close()


def test_the_recipe_sets_limits_and_sampling_and_a_framework_may_cap_or_own_them(service):
    assert service.limits() == Limits(6, 4096, 64, 60.0)
    assert service.limits(max_context_tokens=1000).max_context_tokens == 1000
    assert service.limits(max_context_tokens=9000).max_context_tokens == 4096
    assert service.sampling() == Sampling(1.0, 1.0, -1, 64)
    assert service.sampling(0.5, 0.9, 20) == Sampling(0.5, 0.9, 20, 64)


def test_tasks_by_id_and_split_and_an_unknown_id_names_close_matches(service):
    assert service.task("clamp").family == "clamp"
    assert {task.split for task in service.split("held_out")} == {"held_out"}
    with pytest.raises(UnknownNameError, match=r"unknown bugfix task 'clmap'.*Did you mean 'clamp'.*write it"):
        service.task("clmap", "write it")


def test_play_scores_with_the_recipes_verifier_and_keeps_applies_compact_filtering(service):
    tokenizer = ByteChatTokenizer()
    solved = asyncio.run(service.play(service.task("clamp"), ScriptedGenerate(policies.solver(CLAMP), tokenizer),
                                      tokenizer))
    stalled = asyncio.run(service.play(service.task("clamp"), ScriptedGenerate(["<tool>read</tool>"], tokenizer),
                                       tokenizer))
    assert (solved.reward, solved.termination, service.keeps(solved)) == (1.0, "submitted", True)
    assert (stalled.reward, stalled.termination, service.keeps(stalled)) == (0.0, "max_turns", False)


def test_groups_are_consecutive_episodes_of_each_task(service):
    clamp, span = service.task("clamp"), service.task("span")
    assert grouped([clamp, span], 2) == [(0, clamp), (0, clamp), (1, span), (1, span)]


def test_more_tasks_per_step_than_train_tasks_is_a_clear_error_before_any_episode():
    recipe = load_recipe("grpo", {"rollout.tasks_per_step": 10_000})
    with pytest.raises(RecipeError, match=r"tasks_per_step = 10000, but environment 'bugfix' has \d+ tasks in "
                                          r"split 'train'.*-o rollout.tasks_per_step=\d+"):
        EpisodeService.from_recipe(recipe)


def test_closing_twice_closes_the_environment_once(service, monkeypatch):
    calls = []
    monkeypatch.setattr(service.env, "close", lambda: calls.append(1))
    service.close()
    service.close()
    assert calls == [1]
