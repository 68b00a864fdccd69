"""Reaching OpenRLHF's Ray workers: ``RAY_RUNTIME_ENV_HOOK=agentrl_openrlhf.ray_hook.runtime_env_hook``.

Ray calls :func:`runtime_env_hook` in the driver when ``train_ppo_ray`` calls ``ray.init``; it
adds :func:`setup_worker` as the job's ``worker_process_setup_hook`` and forwards the variables
that name the recipe, the run folder and the backend (and the CPU backend's worker variables, which the
processes of a running cluster, ``RAY_ADDRESS``, would not inherit), so every worker process (trainer, actors,
rollout engines) installs the patches before it runs OpenRLHF code. The driver installs the ones
that must be in place before OpenRLHF creates its actors: under the CPU backend the CPU patches
(the rollout engine is created from the driver), the run-folder recorder (Ray ships the
trainer actor's class from the driver), and the check of ``train_ppo_ray``'s flags against the recipe.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.loggers import wandb_credentials
from agentrl_plugins.runs.rundir import RunDir

from agentrl_openrlhf.cpu import BACKEND_ENV, requested
from agentrl_openrlhf.cpu.launch import WORKER_VARIABLES
from agentrl_openrlhf.recipe_env import RECIPE_ENV, RUN_DIR_ENV, recipe_from_env

SETUP_HOOK = "agentrl_openrlhf.ray_hook.setup_worker"
FORWARDED = (RECIPE_ENV, RUN_DIR_ENV, BACKEND_ENV, "WANDB_DIR", "WANDB_MODE")
"""The launch's variables every worker gets where set (W&B's: the trainer actor logs, on any node). Never W&B's
key: a runtime env's variables show in the job's metadata, so a node's workers log in with the node's own."""
logger = logging.getLogger(__name__)
_installed: list[str] = []


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """The job's runtime env with the worker setup hook and the forwarded variables; fits the Ray cluster
    (:func:`~agentrl_openrlhf.cluster.fit_cluster`) and patches the driver."""
    env = dict(runtime_env or {})
    existing = env.get("worker_process_setup_hook")
    if existing not in (None, SETUP_HOOK):
        raise ValueError(f"the runtime env already has worker_process_setup_hook={existing!r}; "
                         f"agentrl-openrlhf needs {SETUP_HOOK!r} there")
    env["worker_process_setup_hook"] = SETUP_HOOK
    env_vars = dict(env.get("env_vars") or {})
    forwarded = (*FORWARDED, *(WORKER_VARIABLES if requested() else ()))
    env_vars.update({name: os.environ[name] for name in forwarded if os.environ.get(name)})
    env["env_vars"] = env_vars
    from agentrl_openrlhf.cluster import fit_cluster

    fit_cluster()
    install_driver()
    return env


def install_driver() -> list[str]:
    """The driver's patches: the CPU backend's when asked for, the recorder when there is a run folder, and the
    check of ``train_ppo_ray``'s flags against the recipe (:mod:`agentrl_openrlhf.own_flags`) when one is named."""
    installed = _install(recipe_patches=False)
    if os.environ.get(RECIPE_ENV) and "flag check" not in installed:
        from agentrl_openrlhf.own_flags import install_check

        run = RunDir(Path(os.environ[RUN_DIR_ENV])) if os.environ.get(RUN_DIR_ENV) else None
        if install_check(recipe_from_env(), run):
            _installed.append("flag check")
    return list(_installed)


def setup_worker() -> None:
    """Refuse W&B without credentials on this node; seed the process with the recipe's seed, then install the CPU
    backend (when asked for), the recorder (with a run folder) and the recipe's patches.

    OpenRLHF seeds its driver and its model actors (``setup_distributed``) but not the trainer actor, whose prompt
    loader shuffles from the unseeded global generator: without this, two runs of one recipe train on other
    prompts in another order."""
    if os.environ.get("WANDB_DIR") and not wandb_credentials():
        raise AgentRLError(f"--report-to wandb: W&B has no API key on this Ray node ({socket.gethostname()}). The key "
                           "is not forwarded to a cluster's workers (it would show in the job's runtime env): set "
                           "WANDB_API_KEY where the node's Ray starts (`ray start`), or put it in ~/.netrc on the node")
    if os.environ.get(RECIPE_ENV):
        seed_process(recipe_from_env().train.seed)
    patched = _install(recipe_patches=True)
    logger.info("agentrl-openrlhf patched %s", ", ".join(patched) or "nothing (OpenRLHF is native for this recipe)")


def seed_process(seed: int) -> None:
    """Python's, NumPy's and torch's global generators, as ``transformers.set_seed`` seeds them."""
    import random

    import numpy
    import torch

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


def _install(recipe_patches: bool) -> list[str]:
    if requested() and "cpu" not in _installed:
        from agentrl_openrlhf.cpu.patches import install

        install()
        _installed.append("cpu")
    if os.environ.get(RUN_DIR_ENV) and "recorder" not in _installed:
        from agentrl_openrlhf.recorder import recorder_patches

        for patch in recorder_patches():
            patch.apply()
        _installed.append("recorder")
    if recipe_patches and "recipe" not in _installed:
        from agentrl_openrlhf.patches import install

        _installed.extend(install(recipe_from_env()))
        _installed.append("recipe")
    return list(_installed)
