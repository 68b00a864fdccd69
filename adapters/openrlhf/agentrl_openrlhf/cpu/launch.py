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
from typing import Any

from agentrl_plugins.recipe_schema import Recipe

from agentrl_openrlhf.cpu import BACKEND_ENV, SHIMS

TRAINER_RANKS = 1
ROLLOUT_ENGINES = 1
RAY_CPUS = 8


def cpu_env() -> dict[str, str]:
    """Environment of the CPU launch; Ray workers inherit it from the driver that starts the local cluster."""
    return {
        BACKEND_ENV: "cpu",
        "RAY_OVERRIDE_RESOURCES": json.dumps({"CPU": RAY_CPUS, "GPU": TRAINER_RANKS + ROLLOUT_ENGINES}),
        "PYTHONPATH": str(SHIMS),
        "DS_ACCELERATOR": "cpu",
        "TORCHDYNAMO_DISABLE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def cpu_cluster_flags(recipe: Recipe) -> dict[str, Any]:
    """One trainer rank and one rollout engine, not colocated; weight sync over gloo; torch's sdpa attention.

    Micro-batches of one group each keep a step to a few forward passes on a CPU.
    """
    group = recipe.rollout.group_size
    return {
        "actor.num_nodes": 1,
        "actor.num_gpus_per_node": TRAINER_RANKS,
        "vllm.num_engines": ROLLOUT_ENGINES,
        "vllm.tensor_parallel_size": 1,
        "vllm.sync_backend": "gloo",
        "ds.attn_implementation": "sdpa",
        "train.micro_batch_size": group,
        "rollout.micro_batch_size": group,
    }
