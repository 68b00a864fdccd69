"""Turn-level credit: the runner keeps each turn's state keys, reward and signals; GiGPO against numbers worked by
hand from the paper's formulas; per-turn values on tokens; what a recipe or an estimator that breaks the contract
gets."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import pytest
import torch

from agentrl_plugins import hookimpl
from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms.credit import CreditInputs, discounted_returns, gigpo, turn_values_to_tokens
from agentrl_plugins.batch import TrajectoryBatch
from agentrl_plugins.components import AdvantageEstimator, Environment
from agentrl_plugins.environment import StepResult
from agentrl_plugins.episode import run_episode
from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits, Task, Trajectory, TurnOutcome, Verdict

TOKENIZER = ByteChatTokenizer()
ROOT3 = math.sqrt(3)


@dataclass
class CounterSession:
    """A counter: 'up' adds one (its state key), 'done' ends; each step measures the counter as a signal."""

    prompt: str = "count"
    value: int = 0
    initial_state: int = 0

    def step(self, action: str) -> StepResult:
        self.value += action == "up"
        return StepResult("ok", action == "done", state=self.value, reward=0.5 if action == "up" else None,
                          signals={"value": float(self.value)})

    def outcome(self):
        return self.value

    def close(self):
        pass


class CounterEnv:
    system_prompt = "sys"

    def start(self, task):
        return CounterSession()


def test_the_runner_keeps_each_turns_anchor_next_state_reward_and_signals():
    trajectory = asyncio.run(run_episode(CounterEnv(), Task("t", "c", "train", "count"),
                                         ScriptedGenerate(["up", "stay", "up", "done"], TOKENIZER), TOKENIZER,
                                         Limits(max_turns=6), verifier=lambda value: Verdict(float(value), True)))
    assert len(trajectory.turns) == len(trajectory.turn_spans) == 4
    assert [(t.state, t.next_state, t.reward) for t in trajectory.turns] == [
        (0, 1, 0.5), (1, 1, None), (1, 2, 0.5), (2, 2, None)]
    assert [t.signals for t in trajectory.turns] == [{"value": v} for v in (1.0, 1.0, 2.0, 2.0)]


def test_a_turn_cut_by_the_context_budget_keeps_its_anchor_and_no_next_state():
    trajectory = asyncio.run(run_episode(CounterEnv(), Task("t", "c", "train", "count"),
                                         ScriptedGenerate(["up", "up" * 200], TOKENIZER), TOKENIZER,
                                         Limits(max_turns=6, max_context_tokens=120, max_new_tokens_per_turn=1000),
                                         verifier=lambda value: Verdict(0.0, False)))
    assert trajectory.termination == "max_context"
    assert trajectory.turns[-1] == TurnOutcome(1) and len(trajectory.turns) == len(trajectory.turn_spans)


def credit(rewards, groups, anchors, valid=None, turn_rewards=None):
    turns = [[TurnOutcome(state, reward=(turn_rewards or {}).get((row, index)))
              for index, state in enumerate(row_anchors)] for row, row_anchors in enumerate(anchors)]
    spans = [[(2 * index, 2 * index + 1) for index in range(len(row))] for row in anchors]
    return CreditInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups),
                        torch.ones(len(rewards), dtype=torch.bool) if valid is None else torch.tensor(valid),
                        turns, spans, width=2 * max(map(len, anchors)))


def test_gigpo_matches_the_papers_formulas_worked_by_hand():
    # one task group of three episodes over anchor states S0, S1, S2, and a lone episode of another group
    batch = credit([1.0, 0.0, 1.0, 0.0], [0, 0, 0, 1],
                   [["S0", "S1"], ["S0", "S1", "S1"], ["S0", "S2"], ["S0"]])
    advantages = gigpo(batch, gamma=0.5, step_weight=1.0)
    # A_E (GRPO, std over n - 1): rewards 1, 0, 1 -> 1/sqrt3, -2/sqrt3, 1/sqrt3; the lone episode 0.
    # Returns with gamma 0.5: [0.5, 1], [0, 0, 0], [0.5, 1]; step groups S0 {0.5, 0, 0.5} -> 1/sqrt3,
    # -2/sqrt3, 1/sqrt3; S1 {1, 0, 0} -> 2/sqrt3, -1/sqrt3, -1/sqrt3; S2 alone -> 0; group 1's S0 alone -> 0.
    expected = [[2 / ROOT3, ROOT3], [-4 / ROOT3, -ROOT3, -ROOT3], [2 / ROOT3, 1 / ROOT3], [0.0]]
    for row, values in zip(expected, advantages):
        assert values == pytest.approx(row, abs=1e-5)
    assert gigpo(batch, gamma=0.5, step_weight=0.0) == [pytest.approx([a] * n, abs=1e-5) for a, n in
                                                          ((1 / ROOT3, 2), (-2 / ROOT3, 3), (1 / ROOT3, 2), (0.0, 1))]


def test_gigpo_gives_filtered_episodes_nothing_and_turn_rewards_enter_the_returns():
    batch = credit([1.0, 0.0, 1.0], [0, 0, 0], [["S0"], ["S0"], ["S0"]], valid=[True, True, False])
    assert gigpo(batch)[2] == [0.0]
    assert discounted_returns([TurnOutcome(reward=0.5), TurnOutcome(), TurnOutcome(reward=1.0)], 2.0, 0.5) == [
        0.5 + 0.25 * 3.0, 1.5, 3.0]


def test_gigpos_episode_advantage_sums_every_reward_of_the_episode_as_the_paper_does():
    # outcomes 1, 0, 0; the second episode also earned 1.0 on its first turn: totals 1, 1, 0
    batch = credit([1.0, 0.0, 0.0], [0, 0, 0], [["S0", "S1"], ["S0", "S2"], ["S0"]], turn_rewards={(1, 0): 1.0})
    assert gigpo(batch, step_weight=0.0) == [pytest.approx([a] * n, abs=1e-5) for a, n in
                                             ((1 / ROOT3, 2), (1 / ROOT3, 2), (-2 / ROOT3, 1))]
    # turn rewards that sum to the same total in exact arithmetic (thirds, not exact in binary) leave nothing
    thirds = credit([0.0, 0.0], [0, 0], [["S0", "S1", "S2"], ["S0", "S3", "S4"]],
                    turn_rewards={(0, 0): 1 / 3, (0, 1): 1 / 3, (0, 2): -2 / 3, (1, 0): 2 / 3, (1, 1): 1 / 3,
                                  (1, 2): -1.0})
    assert [row[1:] for row in gigpo(thirds, step_weight=1.0)] == [[0.0, 0.0], [0.0, 0.0]]


def test_per_turn_values_cover_their_spans_and_the_recipe_algorithm_gives_tokens():
    batch = credit([1.0, 0.0], [0, 0], [["S0", "S1"], ["S0"]])
    tokens = turn_values_to_tokens([[1.0, 2.0], [3.0]], batch)
    assert tokens.tolist() == [[1.0, 0.0, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="trajectory 1: 2 turn advantages for 1 turns"):
        turn_values_to_tokens([[1.0, 2.0], [3.0, 4.0]], batch)
    trajectories = [Trajectory("t", [0], [1] * 4, [1, 0, 1, 0], [0.0] * 4, [(0, 1), (2, 3)], "submitted", 1.0,
                               turns=[TurnOutcome("S0"), TurnOutcome("S1")]),
                    Trajectory("t", [0], [1] * 2, [1, 0], [0.0] * 2, [(0, 1)], "submitted", 0.0,
                               turns=[TurnOutcome("S0")])]
    trajectory_batch = TrajectoryBatch.from_trajectories(trajectories, torch.float64)
    algorithm = RecipeAlgorithm.from_recipe(load_recipe("gigpo"))
    advantages = algorithm.advantages(trajectory_batch.rewards, trajectory_batch.group_ids,
                                      trajectory_batch.terminations, trajectory_batch)
    episode = 1 / math.sqrt(0.5) / 1.0  # rewards 1, 0: centred 0.5, -0.5, std sqrt(0.5)
    assert advantages.values.shape == (2, 4)
    assert advantages.values[0, 0].item() == pytest.approx(0.5 / math.sqrt(0.5) * 2, abs=1e-5)  # A_E + A_S
    assert advantages.values[0, 2].item() == pytest.approx(episode / 2, abs=1e-5)  # S1 alone: A_E only
    assert advantages.per_token(6)[:, 4:].abs().sum() == 0
    with pytest.raises(AgentRLError, match="'gigpo' is turn-level: it needs the trajectories' turns"):
        algorithm.advantages(trajectory_batch.rewards, trajectory_batch.group_ids, trajectory_batch.terminations)


class Plugins:
    @hookimpl
    def agentrl_register_environments(self, register):
        register(Environment("stateless", lambda: None, "Emits no state keys."))

    @hookimpl
    def agentrl_register_advantages(self, register):
        register(AdvantageEstimator("flat_tokens", lambda c, masked_in_baseline: torch.zeros(2, 3),
                                    "Per-token advantages of the wrong width.", level="token"))
        register(AdvantageEstimator("nan_tokens", lambda c, masked_in_baseline: torch.full(
            (len(c.rewards), c.width), float("nan")), "Per-token NaN.", level="token"))


def test_a_state_grouping_estimator_with_an_environment_without_states_is_refused_at_load():
    manager = PluginManager()
    manager.add_plugin(Plugins(), "credit-plugins", "credit-dist")
    recipe = load_recipe("gigpo", {"environment.name": "stateless"}, plugin_manager=manager)
    with pytest.raises(RecipeError, match="'gigpo' groups turns by their state keys, and environment 'stateless' "
                                          "emits none"):
        RecipeAlgorithm.from_recipe(recipe, manager)


@pytest.mark.parametrize("name, message", [("flat_tokens", r"expected per-token advantages of shape \(2, 4\), got "
                                                           r"\(2, 3\)"),
                                           ("nan_tokens", "advantages must be finite and carry no gradient")])
def test_a_token_level_estimator_that_breaks_the_contract_is_named(name, message):
    manager = PluginManager()
    manager.add_plugin(Plugins(), "credit-plugins", "credit-dist")
    algorithm = RecipeAlgorithm.from_recipe(load_recipe("grpo", {"advantage.estimator": name},
                                                        plugin_manager=manager), manager)
    trajectories = [Trajectory("t", [0], [1] * 4, [1] * 4, [0.0] * 4, [(0, 4)], "submitted", float(r),
                               turns=[TurnOutcome()]) for r in (1, 0)]
    batch = TrajectoryBatch.from_trajectories(trajectories, torch.float64)
    with pytest.raises(AgentRLError, match=f"advantage estimator '{name}': {message}"):
        algorithm.advantages(batch.rewards, batch.group_ids, batch.terminations, batch)
