"""The Ray cluster a verl command trains on, decided when it runs, not when it was prepared.

In ``main_ppo``'s driver, before ``run_ppo`` calls ``ray.init``: with ``RAY_ADDRESS`` set the prepared command's
local-cluster resources (``ray_init.num_cpus``/``num_gpus``, which Ray refuses with an address) are dropped and
the cluster is checked (:func:`agentrl_plugins.runs.ray_cluster.join_cluster`: it answers, token authentication,
a ``GPU`` slot per CPU rank); without it, a CPU command prepared for a running cluster gets the slots of the
cluster verl starts (and its CPU settings: no dashboard, no idle workers). Each change is said on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection

from omegaconf import DictConfig, OmegaConf, open_dict

from agentrl_plugins.adapter import lean_local_ray_env, ray_address
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.runs.ray_cluster import join_cluster

from agentrl_verl import cpu
from agentrl_verl.cpu.overrides import LOCAL_CLUSTER, NO_DASHBOARD, local_cluster_overrides
from agentrl_verl.recipe_file import select


def trainer_ranks(config: DictConfig) -> int:
    """``trainer.nnodes`` x ``trainer.n_gpus_per_node``."""
    return int(select(config, "trainer.nnodes") or 1) * int(select(config, "trainer.n_gpus_per_node") or 1)


def fit_cluster(config: DictConfig, yours: Collection[str]) -> None:
    """Fit ``config``'s ``ray.init`` resources to the cluster this run finds (``yours``: the keys the user's own
    override words set, beside the prepared command's), and check a running one before verl connects."""
    address = select(config, "ray_kwargs.ray_init.address") or ray_address()
    keys = [key.lstrip("+") for key in LOCAL_CLUSTER]
    ranks = trainer_ranks(config)
    if address:
        refused = [key for key in keys if key in yours]
        if refused:
            raise AgentRLError(f"{', '.join(refused)}: the running Ray cluster at {address} brings its own resources, "
                               "and ray.init refuses them with an address: drop them from your command")
        dropped = [key for key in keys if select(config, key) is not None]
        with open_dict(config):
            for key in dropped:
                OmegaConf.update(config, key, None, force_add=True)
        if dropped:
            print(f"agentrl: verl joins the running Ray cluster at {address} (RAY_ADDRESS): the prepared command's "
                  f"{' and '.join(dropped)} (for a cluster verl starts itself) are dropped", file=sys.stderr,
                  flush=True)
        slots = ranks if cpu.requested() else 0
        join_cluster(str(address), "verl", slots, f"its {ranks} trainer rank(s)")
    elif cpu.requested() and select(config, keys[0]) is None:
        resources = {key.lstrip("+"): value for key, value in local_cluster_overrides(ranks).items()
                     if key != NO_DASHBOARD or select(config, key.lstrip("+")) is None}  # a dashboard of yours stays
        os.environ.update(lean_local_ray_env())
        with open_dict(config):
            for key, value in resources.items():
                OmegaConf.update(config, key, value, force_add=True)
        print(f"agentrl: no RAY_ADDRESS: verl starts its own Ray cluster, with {ranks} GPU slot(s) for the CPU "
              f"trainer ranks (the command was prepared for a running cluster)", file=sys.stderr, flush=True)
