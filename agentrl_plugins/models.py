"""Which model a run trains: a registered model's folder, else a local Hugging Face folder.

``train.model`` (and ``agentrl run --model``) names either a model registered through
``agentrl_register_models`` (TinyAgent registers ``tinyagent``) or a local folder that holds
``config.json``, the weights and a tokenizer: the default resolver, since there is no model hub.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl_plugins.errors import ModelUnavailableError, did_you_mean

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager


def resolve_model(name_or_path: str, *, seed: int, prepare: bool, plugin_manager: PluginManager | None = None) -> Path:
    """The absolute folder of ``name_or_path``; ``prepare`` builds a registered model that is not there yet."""
    from agentrl_plugins.plugins import get_plugin_manager

    registry = (plugin_manager or get_plugin_manager()).registry("model")
    if name_or_path in registry:
        path = Path(registry.get(name_or_path).resolve(seed=seed, prepare=prepare))
        return path.resolve()
    return local_model_folder(name_or_path, registry.names())


def local_model_folder(path: str, registered: list[str]) -> Path:
    """``path`` as a local Hugging Face folder, or an error naming the registered models."""
    folder = Path(path).expanduser()
    if folder.is_dir():
        return folder.resolve()
    names = ", ".join(registered) or "none"
    raise ModelUnavailableError(
        f"model {path!r}: not a registered model ({names}) and not a local model folder "
        f"(there is no model hub here).{did_you_mean(path, registered)}")


def run_model(recipe: Any, model: str | None, *, prepare: bool, plugin_manager: PluginManager | None = None) -> Path:
    """The folder a run of ``recipe`` trains: ``model`` (``--model``) if given, else ``train.model``."""
    return resolve_model(model or recipe.train.model, seed=recipe.train.seed, prepare=prepare,
                         plugin_manager=plugin_manager)


def prepare_teacher(recipe: Any, plugin_manager: PluginManager | None = None) -> Path | None:
    """The folder of the recipe's distillation teacher, built now if it is a registered model not built yet (so
    that the rollout workers, which load it, find it ready); None without a teacher."""
    if not recipe.distillation.enabled:
        return None
    return resolve_model(recipe.distillation.teacher, seed=recipe.train.seed, prepare=True,
                         plugin_manager=plugin_manager)
