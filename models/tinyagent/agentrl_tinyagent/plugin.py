"""Registers TinyAgent's two builds as models: ``tinyagent``, the warm start every run starts from, and
``tinyagent_fixer``, a teacher for on-policy distillation; each cached, built with TRL on first use."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Model
from agentrl_plugins.errors import ModelUnavailableError

if TYPE_CHECKING:
    from agentrl_tinyagent.cache import WarmStartSettings

BUILD_HINT = ('build it once where TRL is installed (pip install "agentrl-tinyagent[warmstart]", then '
              'python -c "import agentrl_tinyagent; agentrl_tinyagent.warm_start({arguments})"), with the same '
              'AGENTRL_CACHE')


def resolve(*, seed: int, prepare: bool) -> Path:
    """The warm start every run starts from, whatever its RL seed (a fixed base model, as a hub checkpoint is).
    Finding the cached one imports neither torch nor transformers; building it does."""
    from agentrl_tinyagent.cache import WarmStartSettings

    return built("TinyAgent's warm start", WarmStartSettings(), prepare, "", "pass --model DIR")


def resolve_fixer(*, seed: int, prepare: bool) -> Path:
    """The teacher ``tinyagent_fixer``, whatever the run's seed."""
    from agentrl_tinyagent.cache import FIXER_SETTINGS

    return built("TinyAgent's fixer-only build (the teacher tinyagent_fixer)", FIXER_SETTINGS, prepare,
                 "settings=agentrl_tinyagent.FIXER_SETTINGS", "name a teacher folder (-o distillation.teacher=DIR)")


def built(what: str, settings: WarmStartSettings, prepare: bool, arguments: str, instead: str) -> Path:
    """The cached folder of the build with ``settings`` at the base seed; ``prepare`` builds it when missing
    (``arguments``: what ``warm_start`` is called with to build it by hand; ``instead``: the way around it)."""
    from agentrl_tinyagent.cache import BASE_SEED, model_path

    path = model_path(BASE_SEED, settings=settings)
    if not prepare or (path / "config.json").is_file():
        return path
    if importlib.util.find_spec("trl") is None:
        raise ModelUnavailableError(f"{what} is not in the cache ({path}). It is built with TRL, "
                                    f"which this environment lacks: {BUILD_HINT.format(arguments=arguments)}; or "
                                    f"{instead}")
    from agentrl_tinyagent.warmstart import warm_start

    return warm_start(BASE_SEED, settings=settings)


@hookimpl
def agentrl_register_models(register):
    register(Model("tinyagent", resolve,
                   "A 4-layer Qwen2 warm-started on scripted BugFix transcripts (built locally)."))
    register(Model("tinyagent_fixer", resolve_fixer,
                   "TinyAgent warm-started on the fixer's transcripts only, never the hack: a distillation teacher "
                   "(built locally)."))
