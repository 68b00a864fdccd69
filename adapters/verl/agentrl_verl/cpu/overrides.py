"""The ``main_ppo`` overrides of a CPU run: the ``cpu`` platform's settings and verl's CPU-safe choices."""

from __future__ import annotations

from typing import Any

from agentrl_verl.cpu.attention import PACKED_ATTENTION
from agentrl_verl.names import ROLLOUT_NAME

RAY_CPUS = 16
"""Ray's CPU slots (not cores): verl's actors each ask for one; the processes share the machine's real cores."""


LOCAL_CLUSTER = ("+ray_kwargs.ray_init.num_gpus", "ray_kwargs.ray_init.num_cpus")
"""The overrides of the ``ray.init`` resources of the cluster verl starts itself (``num_gpus`` is not in verl's
config); a running cluster refuses them."""


NO_DASHBOARD = "+ray_kwargs.ray_init.include_dashboard"
"""Off for the local cluster of a CPU run: Ray's dashboard is about a dozen processes, 8% of a short run's CPU time
(``ray_kwargs.ray_init.include_dashboard=true`` after ``main_ppo.sh`` brings it back; a running cluster keeps its
own, and Ray ignores the setting there)."""


def local_cluster_overrides(ranks: int) -> dict[str, Any]:
    """The ``ray.init`` overrides of the local cluster verl starts: :data:`LOCAL_CLUSTER`'s, a ``GPU`` slot per
    trainer rank and :data:`RAY_CPUS` CPU slots, and :data:`NO_DASHBOARD`."""
    return {**dict(zip(LOCAL_CLUSTER, (ranks, RAY_CPUS))), NO_DASHBOARD: False}


VLLM_ON_CPU: dict[str, Any] = {
    "actor_rollout_ref.rollout.enforce_eager": True,
    "+actor_rollout_ref.rollout.enable_sleep_mode": False,
    "actor_rollout_ref.rollout.free_cache_engine": False,
}
"""verl's vLLM rollout on vLLM's CPU build: eager (compiling vLLM's graphs would take the CPU minutes at start-up),
and without sleep mode, which the CPU build does not have ("Sleep mode is not supported on current platform"): the
engine keeps its weights and cache between rollouts."""


def cpu_overrides(seed: int, ranks: int = 1, on_cluster: bool = False, rollout: str = ROLLOUT_NAME) -> dict[str, Any]:
    """Overrides that run ``main_ppo`` on CPU trainer processes (one Ray "GPU" slot each): the local Ray cluster
    verl starts gets ``ranks`` slots and no dashboard, a running one (``on_cluster``, ``RAY_ADDRESS``) brings its
    own; the rollout servers (``rollout``, :func:`~agentrl_verl.cpu.rollout_name`) sample with ``seed``.

    Micro-batches stay at one context's tokens (``max_context_tokens``, the launch's setting): verl packs a
    micro-batch's sequences into one row, and each is attended within itself (:mod:`agentrl_verl.cpu.attention`).
    With one update per step and no correction the recording trainer lets the update score the old policy in its own
    forward, as TRL does, instead of verl's separate pass (:mod:`agentrl_verl.verl_plugin.on_policy`)."""
    actor_rollout_ref = "actor_rollout_ref."
    local_cluster = {} if on_cluster else local_cluster_overrides(ranks)
    return {
        "trainer.device": "cpu",
        **local_cluster,
        # FSDP1 passes a device id to sync_module_states; FSDP2 runs on gloo.
        actor_rollout_ref + "actor.strategy": "fsdp2",
        actor_rollout_ref + "ref.strategy": "fsdp2",
        "critic.strategy": "fsdp2",
        # The rollout server computes in float32: bf16 training would put the log-probs apart.
        "+" + actor_rollout_ref + "actor.fsdp_config.mixed_precision.param_dtype": "fp32",
        "+" + actor_rollout_ref + "ref.fsdp_config.mixed_precision.param_dtype": "fp32",
        # torch.compile of the entropy kernel costs more than it saves on a few CPU threads.
        actor_rollout_ref + "actor.use_torch_compile": False,
        actor_rollout_ref + "actor.fsdp_config.use_torch_compile": False,
        actor_rollout_ref + "ref.fsdp_config.use_torch_compile": False,
        # FlashAttention-2 is verl's default attention; sdpa's dense mask over a packed micro-batch costs the
        # square of its length, the packed-sequence attention each sequence's own (agentrl_verl.cpu.attention).
        "+" + actor_rollout_ref + "model.override_config.attn_implementation": PACKED_ATTENTION,
        actor_rollout_ref + "rollout.name": rollout,
        **(VLLM_ON_CPU if rollout == "vllm" else {}),
        actor_rollout_ref + "rollout.tensor_model_parallel_size": 1,
        actor_rollout_ref + "rollout.seed": seed,
        # Recomputing activations saves accelerator memory; on a CPU it only costs time (a quarter of an update).
        actor_rollout_ref + "model.enable_gradient_checkpointing": False,
        actor_rollout_ref + "rollout.agent.num_workers": 1,
        "reward.num_workers": 1,
        "data.dataloader_num_workers": 0,
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
    }
