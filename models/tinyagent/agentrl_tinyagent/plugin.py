"""Registers TinyAgent as the model ``tinyagent``: its cached warm start, built with TRL on first use."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Model
from agentrl_plugins.errors import ModelUnavailableError

BUILD_HINT = ('build it once where TRL is installed (pip install "agentrl-tinyagent[warmstart]", then '
              'python -c "import agentrl_tinyagent; agentrl_tinyagent.warm_start()"), with the same AGENTRL_CACHE')


def resolve(*, seed: int, prepare: bool) -> Path:
    """The warm start every run starts from, whatever its RL seed (a fixed base model, as a hub checkpoint is).
    Finding the cached one imports neither torch nor transformers; building it does."""
    from agentrl_tinyagent.cache import BASE_SEED, model_path

    path = model_path(BASE_SEED)
    if not prepare or (path / "config.json").is_file():
        return path
    if importlib.util.find_spec("trl") is None:
        raise ModelUnavailableError(f"TinyAgent's warm start is not in the cache ({path}). It is built with TRL, "
                                    f"which this environment lacks: {BUILD_HINT}; or pass --model DIR")
    from agentrl_tinyagent.warmstart import warm_start

    return warm_start(BASE_SEED)


@hookimpl
def agentrl_register_models(register):
    register(Model("tinyagent", resolve,
                   "A 4-layer Qwen2 warm-started on scripted BugFix transcripts (built locally)."))
