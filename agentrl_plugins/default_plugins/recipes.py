"""Registers every recipe file shipped with the core."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from agentrl_plugins.components import RecipeFile
from agentrl_plugins.hookspecs import hookimpl
from agentrl_plugins.recipe import read_toml


def recipes_dir() -> Path:
    """``agentrl_plugins/recipes`` inside a wheel, or ``recipes/`` beside the package in a checkout."""
    packaged = Path(str(resources.files("agentrl_plugins"))) / "recipes"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "recipes"


@hookimpl
def agentrl_register_recipes(register):
    for path in sorted(recipes_dir().glob("*.toml")):
        raw = read_toml(path)
        register(RecipeFile(path.stem, path, raw.get("description", "").split("\n")[0] or path.stem))
