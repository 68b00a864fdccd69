"""verl's ``compute_advantage`` on a DataProto with the registered agentrl estimators vs the core and verl's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage

from agentrl_plugins.algorithms import dr_grpo, grpo, rloo
from agentrl_plugins.components import AdvantageEstimator
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import write_recipe_file

REWARDS = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.5, 0.0, 0.0])
GROUPS = ["a"] * 4 + ["b"] * 4
FILTERED = [1, 6]


def batch(rewards: torch.Tensor = REWARDS, filtered=(), width: int = 5) -> DataProto:
    """Rows of varying length with the reward on the last response token; filtered rows have an all-zero mask."""
    lengths = torch.tensor([5, 3, 4, 2, 5, 1, 3, 4])
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    mask[list(filtered)] = 0
    scores = torch.zeros(len(rewards), width)
    scores[torch.arange(len(rewards)), lengths - 1] = rewards
    data = DataProto.from_single_dict({"token_level_rewards": scores, "response_mask": mask,
                                       "uid": np.array(GROUPS, dtype=object)})
    return data


def algorithm_config(masked_in_baseline: bool | None = None, loss_agg_mode: str = "token-mean", folder=None):
    """``config.algorithm`` as verl passes it: a node of the whole Hydra config, with ``+agentrl.recipe`` (the run
    folder's recipe file) at the root when a recipe sets ``masked_in_baseline``."""
    root = {"algorithm": {"adv_estimator": "agentrl_rloo", "gamma": 1.0, "lam": 1.0},
            "actor_rollout_ref": {"actor": {"loss_agg_mode": loss_agg_mode}}}
    if masked_in_baseline is not None:
        recipe = load_recipe("rloo", {"advantage.masked_in_baseline": masked_in_baseline})
        root["agentrl"] = {"recipe": str(write_recipe_file(folder / "recipe.toml", recipe))}
    return OmegaConf.create(root).algorithm


def advantages(estimator: str, data: DataProto, config=None, **kwargs) -> torch.Tensor:
    out = compute_advantage(data, adv_estimator=estimator, config=config or algorithm_config(), **kwargs)
    return out.batch["advantages"]


def per_row(values: torch.Tensor, data: DataProto) -> torch.Tensor:
    return values[:, None] * data.batch["response_mask"]


def group_tensor() -> torch.Tensor:
    return torch.tensor([0] * 4 + [1] * 4)


def test_registered_rloo_equals_the_core_and_verls_rloo():
    data = batch()
    ours = advantages("agentrl_rloo", batch())
    assert torch.allclose(ours, per_row(rloo(REWARDS, group_tensor()), data), atol=1e-6)
    assert torch.allclose(ours, advantages("rloo", batch()), atol=1e-6)


def test_filtered_rows_stay_in_the_baseline_by_default_as_in_verl():
    data = batch(filtered=FILTERED)
    valid = data.batch["response_mask"].sum(-1) > 0
    ours = advantages("agentrl_rloo", batch(filtered=FILTERED))
    assert torch.allclose(ours, per_row(rloo(REWARDS, group_tensor(), valid, masked_in_baseline=True), data),
                          atol=1e-6)
    assert torch.allclose(ours, advantages("rloo", batch(filtered=FILTERED)), atol=1e-6)
    assert ours[FILTERED].abs().sum() == 0


def test_masked_in_baseline_false_reaches_the_estimator_through_plus_agentrl(tmp_path):
    data = batch(filtered=FILTERED)
    valid = data.batch["response_mask"].sum(-1) > 0
    ours = advantages("agentrl_rloo", batch(filtered=FILTERED),
                      algorithm_config(masked_in_baseline=False, folder=tmp_path))
    expected = rloo(REWARDS, group_tensor(), valid, masked_in_baseline=False)
    assert torch.allclose(ours, per_row(expected, data), atol=1e-6)
    assert not torch.allclose(ours, advantages("rloo", batch(filtered=FILTERED)), atol=1e-3)


@pytest.mark.parametrize("core, verl_name, norm", [(grpo, "grpo", True), (dr_grpo, "grpo", False)])
def test_group_mean_estimators_equal_the_core_and_their_verl_twin(core, verl_name, norm):
    data = batch(filtered=FILTERED)
    valid = data.batch["response_mask"].sum(-1) > 0
    ours = advantages(f"agentrl_{core.__name__}", batch(filtered=FILTERED))
    assert torch.allclose(ours, per_row(core(REWARDS, group_tensor(), valid), data), atol=1e-5)
    native = advantages(verl_name, batch(filtered=FILTERED), norm_adv_by_std_in_grpo=norm)
    assert torch.allclose(ours, native, atol=1e-5)


def test_sequence_mean_losses_get_the_row_scale_that_restores_the_cores_denominator():
    data = batch(filtered=FILTERED)
    valid = data.batch["response_mask"].sum(-1) > 0
    config = algorithm_config(loss_agg_mode="seq-mean-token-sum")
    ours = advantages("agentrl_rloo", batch(filtered=FILTERED), config)
    expected = rloo(REWARDS, group_tensor(), valid) * 8 / 6
    assert torch.allclose(ours, per_row(expected, data), atol=1e-6)


def test_verls_lookup_returns_the_registered_wrapper():
    assert get_adv_estimator_fn("agentrl_rloo").__name__ == "agentrl_rloo"


def test_a_trajectory_estimator_naming_an_advantage_parameter_gets_the_recipes_value(tmp_path):
    from agentrl_verl.verl_plugin.estimators import verl_estimator

    seen = []

    def discounted_rloo(rewards, group_ids, valid=None, *, masked_in_baseline=True, gamma=1.0):
        seen.append(gamma)
        return gamma * rloo(rewards, group_ids, valid, masked_in_baseline=masked_in_baseline)

    recipe = load_recipe("rloo", {"advantage.gamma": 0.5})
    config = OmegaConf.create({"algorithm": {}, "agentrl": {
        "recipe": str(write_recipe_file(tmp_path / "recipe.toml", recipe))}}).algorithm
    data = batch()
    record = AdvantageEstimator("discounted_rloo", discounted_rloo, "RLOO scaled by gamma.")
    values, _ = verl_estimator(record)(data.batch["token_level_rewards"], data.batch["response_mask"],
                                       config, np.array(GROUPS, dtype=object))
    assert seen == [0.5]
    assert torch.allclose(values, per_row(0.5 * rloo(REWARDS, group_tensor()), data), atol=1e-6)


def test_an_agent_loops_several_outputs_are_rows_of_one_episode_in_verls_multi_output_path():
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from agentrl_verl.verl_plugin.estimators import carried_sessions

    # rows 0-7: one output per session; rows 8-9: session a_0's later outputs (its segments), row 10: b_1's
    keys = [f"{uid}_{session}_0" for uid, session in zip(GROUPS, [0, 1, 2, 3] * 2)] + ["a_0_1", "a_0_2", "b_1_1"]
    data = batch()
    extra = batch().select_idxs([0, 0, 5])
    extra.non_tensor_batch["uid"] = np.array(["a", "a", "b"], dtype=object)
    data = DataProto.concat([data, extra])
    config = algorithm_config(loss_agg_mode="seq-mean-token-mean")

    def verls(with_sessions: bool) -> torch.Tensor:
        copy = data.select_idxs(list(range(len(data))))
        if not with_sessions:
            return compute_advantage_for_multi_trajectories(copy, keys, "agentrl_rloo", config=config).batch[
                "advantages"]
        with carried_sessions(keys):
            return compute_advantage_for_multi_trajectories(copy, keys, "agentrl_rloo", config=config).batch[
                "advantages"]

    episodes = rloo(REWARDS, group_tensor())  # each episode once in its group's baseline
    expected = torch.cat([episodes, episodes[[0, 0, 5]]])  # seq-mean's row scale B/R is 1: every row has tokens
    assert torch.allclose(verls(True), per_row(expected, data), atol=1e-6)
    assert not torch.allclose(verls(False), per_row(expected, data), atol=1e-3), "rows as episodes skew the groups"
