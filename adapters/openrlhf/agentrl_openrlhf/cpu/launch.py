"""What the CPU backend adds to the ``train_ppo_ray`` command: environment variables and cluster flags.

Every OpenRLHF actor asks Ray for a ``GPU`` (``cli/train_ppo_ray.py:48``, ``vllm_engine.py:249,303``,
``ppo_actor.py:493``): ``RAY_OVERRIDE_RESOURCES`` gives the local cluster that the unmodified CLI
starts one fake GPU per trainer rank and rollout engine. Torch never sees them
(``torch.cuda.is_available()`` stays False); DeepSpeed runs on its CPU accelerator over gloo.
``TORCHDYNAMO_DISABLE`` runs OpenRLHF's ``@torch.compile`` entropy (``models/utils.py:215``)
eagerly: on a CPU, inductor would spend about 17 s compiling C++ for it on first use.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agentrl_plugins.adapter import lean_local_ray_env
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.vllm_cpu import KV_CACHE_ENV, kv_cache_env

from agentrl_openrlhf.cpu import BACKEND_ENV, ROLLOUT_ENV, shim_paths

ROLLOUT_ENGINES = 1
RAY_CPUS = 8
WORKER_ENV = {
    "DS_ACCELERATOR": "cpu",
    "TORCHDYNAMO_DISABLE": "1",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
"""What every CPU worker needs, whatever its rollout engine."""
WORKER_VARIABLES = (*WORKER_ENV, "PYTHONPATH", ROLLOUT_ENV, KV_CACHE_ENV)
"""The variables of :func:`cpu_env` the runtime-env hook forwards to the processes of a running cluster."""


RESOURCES_ENV = "RAY_OVERRIDE_RESOURCES"
"""The resources of the local cluster ``ray.init`` starts (Ray ignores it when joining a running one)."""


def local_cluster_env(slots: int) -> dict[str, str]:
    """The environment of the local cluster ``ray.init`` starts: :data:`RESOURCES_ENV` with ``slots`` fake GPUs (a
    trainer rank or rollout engine each), and no idle workers started ahead of need
    (:func:`~agentrl_plugins.adapter.lean_local_ray_env`)."""
    return {RESOURCES_ENV: json.dumps({"CPU": RAY_CPUS, "GPU": slots}), **lean_local_ray_env()}


def cpu_env(ranks: int = 1, on_cluster: bool = False, rollout: str = "hf") -> dict[str, str]:
    """Environment of the CPU launch, ``rollout`` its rollout engine (:func:`~agentrl_openrlhf.cpu.choose_rollout`).
    The local cluster ``train_ppo_ray`` starts gets a fake GPU per trainer rank and rollout engine
    (:func:`local_cluster_env`); a running one (``on_cluster``, ``RAY_ADDRESS``) brings its own resources and
    settings. The shims go before the user's own ``PYTHONPATH``, which is kept; vLLM's KV cache is
    :func:`~agentrl_plugins.vllm_cpu.kv_cache_env`'s unless you size it."""
    resources = {} if on_cluster else local_cluster_env(ranks + ROLLOUT_ENGINES)
    engine = {ROLLOUT_ENV: rollout, **(kv_cache_env() if rollout == "vllm" else {})}
    path = os.pathsep.join([*shim_paths(rollout), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {BACKEND_ENV: "cpu", **resources, **WORKER_ENV, **engine, "PYTHONPATH": path}


def cpu_cluster_flags(recipe: Recipe, nodes: int = 1, ranks_per_node: int = 1) -> dict[str, Any]:
    """``nodes`` x ``ranks_per_node`` trainer ranks and one rollout engine, not colocated; weight sync over gloo;
    torch's sdpa attention; vLLM eager (compiling its graphs would take the CPU minutes at start-up), its prefix cache
    on (an episode's later turns extend its earlier ones).

    Micro-batches of one group each keep a step to a few forward passes on a CPU.
    """
    group = recipe.rollout.group_size
    return {
        "actor.num_nodes": nodes,
        "actor.num_gpus_per_node": ranks_per_node,
        "vllm.num_engines": ROLLOUT_ENGINES,
        "vllm.tensor_parallel_size": 1,
        "vllm.sync_backend": "gloo",
        "vllm.enforce_eager": True,
        "vllm.enable_prefix_caching": True,
        "ds.attn_implementation": "sdpa",
        "train.micro_batch_size": group,
        "rollout.micro_batch_size": group,
    }
