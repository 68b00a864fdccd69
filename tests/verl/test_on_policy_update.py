"""verl's ``ppo_loss`` without the old-log-prob pass (``+agentrl.on_policy_update``): with one epoch of one
mini-batch the update's own forward is the old policy's, so the loss and its gradient equal verl's with the pass,
whose old log-probs are the same forward's; the entropy figure the pass gave comes from the update."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers import engine_workers
from verl.workers.config import ActorConfig
from verl.workers.utils.padding import no_padding_2_padding

from agentrl_plugins.errors import AgentRLError

from agentrl_verl.verl_plugin import on_policy
from agentrl_verl.verl_plugin.on_policy import ENTROPY_METRIC, ON_POLICY
from agentrl_verl.verl_plugin.trainer import on_policy_update

ROWS, PROMPT, RESPONSE = 4, 3, 6


def step(old_log_probs: str, flagged: bool, mode: str):
    """One micro-batch through the worker's ``ppo_loss``: the loss, its gradient and metrics."""
    g = torch.Generator().manual_seed(0)
    values = (-torch.rand(ROWS * (PROMPT + RESPONSE), generator=g, dtype=torch.float64) * 3).requires_grad_()
    entropy = torch.rand(ROWS * (PROMPT + RESPONSE), generator=g, dtype=torch.float64)
    mask = (torch.arange(RESPONSE)[None] < torch.tensor([6, 4, 2, 5])[:, None]).to(torch.int64)
    mask[1, 0] = 0  # an observation token inside the response
    data = TensorDict({"prompts": torch.ones(ROWS, PROMPT, dtype=torch.long),
                       "responses": torch.ones(ROWS, RESPONSE, dtype=torch.long),
                       "attention_mask": torch.ones(ROWS, PROMPT + RESPONSE, dtype=torch.long),
                       "response_mask": mask,
                       "advantages": torch.randn(ROWS, generator=g, dtype=torch.float64)[:, None].expand(-1, RESPONSE)},
                      batch_size=ROWS)
    learner = no_padding_2_padding(values.detach(), data)
    data["old_log_probs"] = learner if old_log_probs == "learner" else torch.full_like(learner, float("nan"))
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=float(mask.sum()), global_batch_size=float(ROWS),
                         **({ON_POLICY: True} if flagged else {}))
    config = ActorConfig(strategy="fsdp", rollout_n=1, clip_ratio_low=0.2, clip_ratio_high=0.28, loss_agg_mode=mode,
                         ppo_micro_batch_size_per_gpu=1)
    loss, metrics = engine_workers.ppo_loss(config, {"log_probs": values, "entropy": entropy}, data)
    loss.backward()
    expected_entropy = (no_padding_2_padding(entropy, data) * mask).sum() / mask.sum()
    return loss.detach(), values.grad, metrics, expected_entropy


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum"])
def test_the_update_scores_the_old_policy_in_its_own_forward(mode):
    on_policy.install()
    with_pass, grad_with_pass, metrics, _ = step("learner", flagged=False, mode=mode)
    without, grad_without, on_policy_metrics, entropy = step("nan", flagged=True, mode=mode)
    assert torch.isfinite(without) and torch.equal(without, with_pass)
    assert torch.equal(grad_without, grad_with_pass) and grad_with_pass.abs().sum() > 0
    assert ENTROPY_METRIC not in metrics
    assert on_policy_metrics[ENTROPY_METRIC].aggregate() == pytest.approx(entropy.item(), abs=1e-12)


def test_old_log_probs_left_unscored_show_where_they_are_used():
    on_policy.install()
    loss, *_ = step("nan", flagged=False, mode="token-mean")
    assert torch.isnan(loss), "the trainer's placeholder is NaN, never a plausible number"


BASE = {"trainer": {"device": "cpu"}, "actor_rollout_ref": {"actor": {"ppo_epochs": 1}},
        "algorithm": {"rollout_correction": {"rollout_is": None, "rollout_rs": None}, "use_kl_in_reward": False}}
NOT_EXACT = [({"actor_rollout_ref": {"actor": {"ppo_epochs": 2}}}, "ppo_epochs=2"),
             ({"algorithm": {"rollout_correction": {"rollout_is": "token"}}}, "a rollout correction"),
             ({"algorithm": {"use_kl_in_reward": True}}, "use_kl_in_reward")]


def config(*layers: dict):
    return OmegaConf.merge(OmegaConf.create(BASE), *[OmegaConf.create(layer) for layer in layers])


def test_a_cpu_run_updates_on_policy_wherever_it_is_exact_and_a_gpu_run_when_asked():
    assert on_policy_update(config())
    assert not on_policy_update(config({"trainer": {"device": "cuda"}}))
    assert on_policy_update(config({"trainer": {"device": "cuda"}, "agentrl": {"on_policy_update": True}}))
    assert not on_policy_update(config({"agentrl": {"on_policy_update": False}}))
    for setting, _ in NOT_EXACT:
        assert not on_policy_update(config(setting)), "verl's pass stays where it is not the update's forward"


@pytest.mark.parametrize(("setting", "named"), NOT_EXACT)
def test_asking_for_it_where_the_pass_is_not_the_updates_own_forward_is_refused(setting, named):
    with pytest.raises(AgentRLError, match=f"on_policy_update=true.*{named}"):
        on_policy_update(config(setting, {"agentrl": {"on_policy_update": True}}))
