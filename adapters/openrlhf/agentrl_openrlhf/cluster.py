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

from agentrl_openrlhf.cpu import requested
from agentrl_openrlhf.cpu.launch import RESOURCES_ENV, local_cluster_env
from agentrl_openrlhf.own_flags import in_train_ppo_ray, run_cli


def cpu_slots(argv: list[str]) -> tuple[int, int]:
    """The trainer ranks and rollout engine slots ``train_ppo_ray ARGV`` places, by OpenRLHF's own parser."""
    flags = run_cli(argv, "hierarchize")
    ranks = int(flags["actor.num_nodes"]) * int(flags["actor.num_gpus_per_node"])
    return ranks, int(flags["vllm.num_engines"]) * int(flags["vllm.tensor_parallel_size"])


def fit_cluster() -> None:
    """Check the running cluster at ``RAY_ADDRESS`` before the driver connects, or give the local cluster of a CPU
    run its slots (OpenRLHF's own parse of the command only where one of them needs it); nothing outside
    ``train_ppo_ray``'s driver on the CPU backend but the cluster check."""
    address, counted = ray_address(), requested() and in_train_ppo_ray()
    if not address and (not counted or RESOURCES_ENV in os.environ):
        return
    ranks, engines = cpu_slots(sys.argv[1:]) if counted else (0, 0)
    if address:
        join_cluster(address, "OpenRLHF", ranks + engines,
                     f"its {ranks} trainer rank(s) and {engines} rollout engine(s)")
    else:
        os.environ.update(local_cluster_env(ranks + engines))
        print(f"agentrl: no RAY_ADDRESS: OpenRLHF starts its own Ray cluster, with {ranks + engines} GPU slot(s) for "
              "the CPU trainer ranks and rollout engines (the command was prepared for a running cluster)",
              file=sys.stderr, flush=True)
