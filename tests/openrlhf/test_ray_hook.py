"""The runtime-env hook: it reaches the workers of a real local Ray cluster, and refuses a changed OpenRLHF."""

from __future__ import annotations

import pytest
import ray

from agentrl_plugins.errors import AgentRLError

from agentrl_openrlhf import patches
from agentrl_openrlhf.config import RUNTIME_ENV_HOOK
from agentrl_openrlhf.patches import PatchError
from agentrl_openrlhf.ray_hook import SETUP_HOOK, runtime_env_hook, setup_worker
from agentrl_openrlhf.recipe_env import RECIPE_ENV


@ray.remote
def patched_methods() -> dict[str, str]:
    """Which module each patch target's method comes from, inside a Ray worker."""
    from openrlhf.models.loss import PolicyLoss
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    return {"PolicyLoss.forward": PolicyLoss.forward.__module__,
            "RemoteExperienceMaker.compute_advantages_and_returns":
                RemoteExperienceMaker.compute_advantages_and_returns.__module__}


def test_the_hook_adds_the_setup_hook_and_forwards_the_recipe(monkeypatch):
    monkeypatch.setenv(RECIPE_ENV, "deepswe_grpopp")
    env = runtime_env_hook({"env_vars": {"NCCL_DEBUG": "WARN"}})
    assert env["worker_process_setup_hook"] == SETUP_HOOK
    assert env["env_vars"] == {"NCCL_DEBUG": "WARN", RECIPE_ENV: "deepswe_grpopp"}
    assert runtime_env_hook(None)["worker_process_setup_hook"] == SETUP_HOOK
    with pytest.raises(ValueError, match="worker_process_setup_hook"):
        runtime_env_hook({"worker_process_setup_hook": "somebody.else"})


def test_wandbs_key_stays_on_the_node_and_a_node_without_one_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr("agentrl_openrlhf.ray_hook.install_driver", lambda: [])
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    env_vars = runtime_env_hook({})["env_vars"]
    assert env_vars == {"WANDB_DIR": str(tmp_path)}, "the key is not in the job's runtime env"
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with pytest.raises(AgentRLError, match="no API key on this Ray node .*WANDB_API_KEY"):
        setup_worker()


def test_the_patches_reach_a_worker_of_a_local_ray_cluster(use_recipe, monkeypatch, worker_env):
    use_recipe({"advantage.estimator": "grpo"})
    monkeypatch.setenv("RAY_RUNTIME_ENV_HOOK", RUNTIME_ENV_HOOK)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": worker_env})
    try:
        found = ray.get(patched_methods.remote(), timeout=120)
    finally:
        ray.shutdown()
    assert found == {"PolicyLoss.forward": "agentrl_openrlhf.patches",
                     "RemoteExperienceMaker.compute_advantages_and_returns": "agentrl_openrlhf.patches"}


def test_a_changed_signature_fails_clearly(use_recipe, monkeypatch):
    from openrlhf.models.loss import PolicyLoss

    recipe = use_recipe()
    monkeypatch.setattr(PolicyLoss, "forward", lambda self, log_probs, old_log_probs, advantages: None)
    with pytest.raises(PatchError, match=r"openrlhf\.models\.loss\.PolicyLoss\.forward.*0\.11\.2.*installed: 0\.11\.2"):
        patches.patches(recipe)
    monkeypatch.setattr(patches, "EXPERIENCE_MAKER", ("openrlhf.trainer.ppo_utils.experience_maker", "Gone", "x", ()))
    with pytest.raises(PatchError, match="Gone"):
        patches.patches(use_recipe({"advantage.estimator": "grpo", "loss.aggregation": "token-mean"}))
