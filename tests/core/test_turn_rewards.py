"""Turn rewards: potential-based shaping against numbers worked by hand, GRPO on returns-to-go (grpo exactly
without turn rewards), a third-party turn reward through the episode runner, and what bad input gets."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
import torch

from agentrl_plugins import hookimpl
from agentrl_plugins.algorithms.advantages import grpo
from agentrl_plugins.algorithms.credit import CreditInputs, grpo_turns
from agentrl_plugins.algorithms.turn_rewards import MissingSignalError, potential
from agentrl_plugins.components import Environment, TurnReward, Verifier
from agentrl_plugins.environment import StepResult
from agentrl_plugins.episode_service import EpisodeService
from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.turn_rewards import build_turn_reward
from agentrl_plugins.types import Task, TurnOutcome, Verdict

TOKENIZER = ByteChatTokenizer()


def turns_with(potentials, reward=None):
    """Turns whose next states have the given potentials (signal "p")."""
    return [TurnOutcome(index, index + 1, reward, {"p": value}) for index, value in enumerate(potentials)]


def test_potential_shaping_is_gamma_phi_next_minus_phi_with_zero_at_the_end():
    turns = turns_with([0.5, 1.0, 0.25])
    assert potential(turns, {"p": 0.25}, gamma=0.9, signal="p") == pytest.approx(
        [0.9 * 0.5 - 0.25, 0.9 * 1.0 - 0.5, -1.0])  # the last turn leaves Phi(s_2) = 1 for the absorbing end, 0
    assert potential([], {"p": 0.25}, gamma=0.9, signal="p") == []


@pytest.mark.parametrize("gamma", [1.0, 0.95, 0.5])
def test_the_discounted_shaping_from_any_turn_on_sums_to_minus_its_states_potential(gamma):
    generator = torch.Generator().manual_seed(int(gamma * 100))
    values = torch.rand(7, generator=generator, dtype=torch.float64).tolist()
    start, turns = values[0], turns_with(values[1:])
    shaped = potential(turns, {"p": start}, gamma=gamma, signal="p")
    phis = [start, *values[1:]]
    for t in range(len(turns)):
        assert sum(gamma ** (k - t) * shaped[k] for k in range(t, len(turns))) == pytest.approx(-phis[t])


def test_a_missing_signal_names_the_state_and_what_the_environment_gave():
    with pytest.raises(MissingSignalError, match=r"'p' signal of the start state .*gave none"):
        potential(turns_with([1.0]), {}, gamma=1.0, signal="p")
    turns = [TurnOutcome(0, 1, None, {"q": 1.0}), TurnOutcome(1, 2, None, {"p": 1.0})]
    with pytest.raises(MissingSignalError, match=r"state after turn 0, and the environment gave \['q'\]"):
        potential(turns, {"p": 0.0}, gamma=1.0, signal="p")


def random_credit(seed, turn_rewards=False):
    generator = torch.Generator().manual_seed(seed)
    rows = 12
    rewards = (torch.rand(rows, generator=generator, dtype=torch.float64) > 0.5).to(torch.float64)
    groups = torch.arange(rows) // 4
    valid = torch.rand(rows, generator=generator) > 0.2
    lengths = torch.randint(1, 5, (rows,), generator=generator).tolist()
    turns = [[TurnOutcome(t, t + 1, float(torch.rand(1, generator=generator)) if turn_rewards else None)
              for t in range(n)] for n in lengths]
    spans = [[(2 * t, 2 * t + 1) for t in range(n)] for n in lengths]
    return CreditInputs(rewards, groups, valid, turns, spans, width=10)


@pytest.mark.parametrize("masked_in_baseline", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_grpo_turns_without_turn_rewards_and_discount_is_grpo_on_every_turn(seed, masked_in_baseline):
    batch = random_credit(seed)
    expected = grpo(batch.rewards, batch.group_ids, batch.valid, masked_in_baseline=masked_in_baseline)
    got = grpo_turns(batch, masked_in_baseline=masked_in_baseline, gamma=1.0)
    assert got == [[float(expected[row])] * len(turns) for row, turns in enumerate(batch.turns)]


def test_grpo_turns_with_shaping_subtracts_each_turns_state_potential():
    # two episodes of one task from Phi(s_0) = 0.25: a success through Phi 0.5 and a failure through Phi 1.0
    shaped = [[TurnOutcome(0, 1, r) for r in potential(turns_with(p), {"p": 0.25}, gamma=1.0, signal="p")]
              for p in ([0.5, 0.5], [1.0, 0.0])]
    batch = CreditInputs(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 0]),
                         torch.tensor([True, True]), shaped, [[(0, 1), (2, 3)]] * 2, width=4)
    # whole returns G_0 = R - Phi(s_0): 0.75 and -0.25, mean 0.25, std sqrt(0.5); G_1 = R - Phi(s_1)
    std = 0.5 ** 0.5
    expected = [[0.5 / std, (0.5 - 0.25) / std], [-0.5 / std, (-1.0 - 0.25) / std]]
    for row, values in zip(expected, grpo_turns(batch, gamma=1.0)):
        assert values == pytest.approx(row, abs=1e-5)


def test_a_group_whose_whole_returns_are_equal_gives_its_turns_nothing():
    shaped = [[TurnOutcome(0, 1, r) for r in potential(turns_with(p), {"p": 0.0}, gamma=1.0, signal="p")]
              for p in ([0.5, 0.5], [1.0, 0.0])]
    batch = CreditInputs(torch.zeros(2, dtype=torch.float64), torch.tensor([0, 0]), torch.tensor([True, True]),
                         shaped, [[(0, 1), (2, 3)]] * 2, width=4)
    assert grpo_turns(batch, gamma=1.0) == [[0.0, 0.0], [0.0, 0.0]], "no outcome to learn from, as grpo says"


THIRDS = (1 / 3, 2 / 3, 1.0)
"""A pass fraction over three public tests (and 0): Phi values not exact in binary, so shaping terms summed in
floating point do not cancel exactly."""


def shaped_episode(path, gamma=1.0):
    """An episode from Phi(s_0) = 0 through the potentials of ``path``, its turns rewarded by potential shaping."""
    turns = turns_with(path)
    rewards = potential(turns, {"p": 0.0}, gamma=gamma, signal="p")
    return [TurnOutcome(turn.state, turn.next_state, reward, turn.signals) for turn, reward in zip(turns, rewards)]


@pytest.mark.parametrize("gamma", [1.0, 0.95])
@pytest.mark.parametrize("outcome", [0.0, 1.0])
def test_a_group_with_one_outcome_gets_nothing_whatever_path_of_thirds_its_episodes_took(outcome, gamma):
    paths = [[1 / 3, 2 / 3, 1.0], [2 / 3, 1 / 3, 1.0], [1.0, 2 / 3, 1 / 3], [1 / 3, 1.0, 2 / 3]]
    batch = CreditInputs(torch.full((4,), outcome, dtype=torch.float64), torch.zeros(4, dtype=torch.long),
                         torch.ones(4, dtype=torch.bool), [shaped_episode(path, gamma) for path in paths],
                         [[(0, 1), (1, 2), (2, 3)]] * 4, width=3)
    assert grpo_turns(batch, gamma=gamma) == [[0.0] * 3] * 4, "equal outcomes: nothing to learn, not 1e6"


@pytest.mark.parametrize("seed", range(5))
def test_grpo_turns_on_shaped_thirds_is_the_exact_outcome_advantage_less_each_states_potential(seed):
    generator = torch.Generator().manual_seed(seed)
    rows, size, settled = 32, 4, 16
    rewards = (torch.rand(rows, generator=generator, dtype=torch.float64) > 0.5).to(torch.float64)
    rewards[:settled] = 0.0  # four groups with a single outcome, the others mostly mixed
    groups = torch.arange(rows) // size
    lengths = torch.randint(2, 7, (rows,), generator=generator).tolist()
    paths = [[THIRDS[int(i)] for i in torch.randint(0, 3, (n,), generator=generator)] for n in lengths]
    batch = CreditInputs(rewards, groups, torch.ones(rows, dtype=torch.bool), [shaped_episode(p) for p in paths],
                         [[(t, t + 1) for t in range(n)] for n in lengths], width=6)
    outcome = grpo(rewards, groups)  # G_0 = R - Phi(s_0) = R exactly: the group statistics are the outcomes'
    std = torch.stack([rewards[groups == g].std() for g in groups.tolist()])
    for row, values in enumerate(grpo_turns(batch, gamma=1.0)):
        phis = [0.0, *paths[row][:-1]]  # G_t = R - Phi(s_t), the state turn t acted from
        expected = [float(outcome[row]) - phi / (float(std[row]) + 1e-6) if std[row] > 0 else 0.0 for phi in phis]
        assert values == pytest.approx(expected, abs=1e-6)
    assert all(v == 0.0 for row in grpo_turns(batch, gamma=1.0)[:settled] for v in row)


@dataclass
class Walk:
    """A walk on 0..3: 'right' moves up; its signal is the position over 3; 'stop' ends."""

    prompt: str = "walk"
    position: int = 0
    initial_state: int = 0
    initial_signals: dict | None = None

    def __post_init__(self):
        self.initial_signals = {"progress": 0.0}

    def step(self, action: str) -> StepResult:
        self.position += action == "right"
        return StepResult("ok", action == "stop", state=self.position, reward=0.125 if action == "stop" else None,
                          signals={"progress": self.position / 3})

    def outcome(self):
        return self.position

    def close(self):
        pass


class WalkSuite:
    system_prompt = "sys"

    def tasks(self, split=None):
        return [Task(f"walk{i}", "walk", "train", "walk") for i in range(4)]

    def start(self, task):
        return Walk()


class Plugins:
    """A third-party turn reward (a step cost) and one that breaks the contract, and the walk environment."""

    @hookimpl
    def agentrl_register_turn_rewards(self, register):
        register(TurnReward("step_cost", lambda turns, initial_signals: [-0.01] * len(turns), "A cost per turn."))
        register(TurnReward("too_few", lambda turns, initial_signals: [0.0], "One reward whatever the turns."))

    @hookimpl
    def agentrl_register_environments(self, register):
        register(Environment("walk", lambda **options: WalkSuite(), "A walk.", turn_states=True))

    @hookimpl
    def agentrl_register_verifiers(self, register):
        register(Verifier("at_two", lambda: lambda position: Verdict(float(position == 2), position == 2),
                          "Reward 1 at position 2."))


@pytest.fixture(scope="module")
def manager():
    manager = PluginManager()
    manager.add_plugin(Plugins(), "walk-plugin", "walk-dist")
    return manager


def walk_recipe(**overrides):
    return load_recipe("grpo", {"environment.name": "walk", "environment.options": {}, "verifier.names": ["at_two"],
                                "advantage.estimator": "grpo_turns", "rollout.tasks_per_step": 1, **overrides})


def play(service, actions):
    seen = []
    service.hooks = type("Hooks", (), {"agentrl_episode_end": lambda self, trajectory: seen.append(trajectory)})()
    trajectory = asyncio.run(service.play(service.task("walk0"), ScriptedGenerate(actions, TOKENIZER), TOKENIZER))
    assert seen == [trajectory], "the episode-end hook sees the turns with their rewards"
    return trajectory


def test_potential_shaping_through_the_episode_service_adds_to_the_environments_turn_rewards(manager):
    recipe = walk_recipe(**{"turn_reward.name": "potential", "turn_reward.signal": "progress",
                            "advantage.gamma": 1.0})
    service = EpisodeService.from_recipe(recipe, manager)
    trajectory = play(service, ["right", "right", "stop"])
    assert trajectory.initial_signals == {"progress": 0.0}
    # Phi: 0 -> 1/3 -> 2/3 -> 2/3 (then the end, 0); the stop turn also earns the environment's 0.125
    assert [t.reward for t in trajectory.turns] == pytest.approx([1 / 3, 1 / 3, 0.125 - 2 / 3])


def test_a_third_party_turn_reward_runs_and_one_that_breaks_the_contract_is_named(manager):
    trajectory = play(EpisodeService.from_recipe(walk_recipe(**{"turn_reward.name": "step_cost"}), manager),
                      ["right", "stop"])
    assert [t.reward for t in trajectory.turns] == pytest.approx([-0.01, 0.125 - 0.01])
    broken = EpisodeService.from_recipe(walk_recipe(**{"turn_reward.name": "too_few"}), manager)
    with pytest.raises(AgentRLError, match="turn reward 'too_few' returned 1 rewards for 2 turns"):
        play(broken, ["right", "stop"])


def test_a_turn_reward_with_a_trajectory_level_estimator_or_without_its_signal_is_refused_at_load(manager):
    with pytest.raises(RecipeError, match="turn_reward.name = 'potential' rewards turns, and advantage.estimator = "
                                          "'grpo' gives one advantage per trajectory"):
        EpisodeService.from_recipe(walk_recipe(**{"turn_reward.name": "potential", "turn_reward.signal": "progress",
                                                  "advantage.estimator": "grpo"}), manager)
    with pytest.raises(RecipeError, match="reads a state signal: name it with turn_reward.signal"):
        build_turn_reward(walk_recipe(**{"turn_reward.name": "potential"}), manager)
    with pytest.raises(Exception, match="Did you mean 'potential'"):
        build_turn_reward(walk_recipe(**{"turn_reward.name": "potental"}), manager)


def test_the_shipped_recipe_shapes_the_bugfix_gyms_public_pass_fraction():
    recipe = load_recipe("potential_shaping", profile="laptop")
    assert (recipe.turn_reward.name, recipe.turn_reward.signal) == ("potential", "public_pass_fraction")
    assert recipe.environment.options == {"renamed_variants": 4, "turn_signals": True}
    assert recipe.advantage.estimator == "grpo_turns" and recipe.advantage.gamma == 1.0
