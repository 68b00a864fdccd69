"""Reaching OpenRLHF's Ray workers: ``RAY_RUNTIME_ENV_HOOK=agentrl_openrlhf.ray_hook.runtime_env_hook``.

Ray calls :func:`runtime_env_hook` in the driver when ``train_ppo_ray`` calls ``ray.init``; it
adds :func:`setup_worker` as the job's ``worker_process_setup_hook`` and forwards
``AGENTRL_OPENRLHF_RECIPE``, so every worker process (trainer, actors, rollout engines)
installs the recipe's patches before it runs OpenRLHF code.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from agentrl_openrlhf.recipe_env import RECIPE_ENV, recipe_from_env

SETUP_HOOK = "agentrl_openrlhf.ray_hook.setup_worker"
logger = logging.getLogger(__name__)


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """The job's runtime env with the worker setup hook and the recipe variable added."""
    env = dict(runtime_env or {})
    existing = env.get("worker_process_setup_hook")
    if existing not in (None, SETUP_HOOK):
        raise ValueError(f"the runtime env already has worker_process_setup_hook={existing!r}; "
                         f"agentrl-openrlhf needs {SETUP_HOOK!r} there")
    env["worker_process_setup_hook"] = SETUP_HOOK
    env_vars = dict(env.get("env_vars") or {})
    if os.environ.get(RECIPE_ENV):
        env_vars[RECIPE_ENV] = os.environ[RECIPE_ENV]
    env["env_vars"] = env_vars
    return env


def setup_worker() -> None:
    """Install the recipe's patches in this worker process."""
    from agentrl_openrlhf.patches import install

    patched = install(recipe_from_env())
    logger.info("agentrl-openrlhf patched %s", ", ".join(patched) or "nothing (OpenRLHF is native for this recipe)")
