"""The Ray cluster a ``train_ppo_ray`` command trains on, decided when it runs, not when it was prepared.

In the driver, from the runtime-env hook (``ray.init`` calls it before it connects or starts a cluster): with
``RAY_ADDRESS`` set, the cluster is checked (:func:`agentrl_plugins.runs.ray_cluster.join_cluster`: it answers,
token authentication, a ``GPU`` slot per CPU trainer rank and rollout engine, where OpenRLHF would otherwise wait
for them forever); without it, a CPU command prepared for a running cluster gets the slots of the cluster
``ray.init`` starts. Each change is said on stderr.
"""

from __future__ import annotations

import os
import sys

from agentrl_plugins.adapter import ray_address
from agentrl_plugins.runs.ray_cluster import join_cluster

from agentrl_openrlhf.config import CLI_MODULE
from agentrl_openrlhf.cpu import requested
from agentrl_openrlhf.cpu.launch import RESOURCES_ENV, local_cluster_resources


def cpu_slots(argv: list[str]) -> tuple[int, int]:
    """The trainer ranks and rollout engine slots ``train_ppo_ray ARGV`` places, by OpenRLHF's own parser."""
    from agentrl_openrlhf.own_flags import run_cli

    flags = run_cli(argv, "hierarchize")
    ranks = int(flags["actor.num_nodes"]) * int(flags["actor.num_gpus_per_node"])
    return ranks, int(flags["vllm.num_engines"]) * int(flags["vllm.tensor_parallel_size"])


def in_train_ppo_ray() -> bool:
    """Whether this process is ``python -m openrlhf.cli.train_ppo_ray``'s driver."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == CLI_MODULE


def fit_cluster() -> None:
    """Check the running cluster at ``RAY_ADDRESS`` before the driver connects, or give the local cluster of a CPU
    run its slots; nothing outside ``train_ppo_ray``'s driver on the CPU backend but the cluster check."""
    address = ray_address()
    counted = requested() and in_train_ppo_ray()
    ranks, engines = cpu_slots(sys.argv[1:]) if counted else (0, 0)
    if address:
        join_cluster(address, "OpenRLHF", ranks + engines,
                     f"its {ranks} trainer rank(s) and {engines} rollout engine(s)")
    elif counted and RESOURCES_ENV not in os.environ:
        os.environ.update(local_cluster_resources(ranks + engines))
        print(f"agentrl: no RAY_ADDRESS: OpenRLHF starts its own Ray cluster, with {ranks + engines} GPU slot(s) for "
              "the CPU trainer ranks and rollout engines (the command was prepared for a running cluster)",
              file=sys.stderr, flush=True)
