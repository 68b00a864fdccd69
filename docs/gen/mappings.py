"""Write one framework's mapping table for every shipped recipe as JSON, from its adapter's ``describe()``.

Run it with the framework's own interpreter (the adapters cannot share one environment):
``.venvs/verl/bin/python docs/gen/mappings.py verl docs/generated/mappings/verl.json``.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

from agentrl_plugins.errors import RecipeError
from agentrl_plugins.plugins import CORE_DISTRIBUTION, get_plugin_manager
from agentrl_plugins.recipe import load_recipe


def mapping_tables(framework: str) -> dict[str, Any]:
    """The framework's version and, per shipped recipe, its ``ComponentMapping`` rows as plain data."""
    manager = get_plugin_manager()
    adapter = manager.get("adapter", framework).factory()
    recipes = [entry.record.name for entry in manager.registry("recipe") if entry.distribution == CORE_DISTRIBUTION]
    distribution = manager.registry("adapter").entry(framework).distribution
    try:
        version = importlib.metadata.version(framework)
    except importlib.metadata.PackageNotFoundError:  # a framework not published under its adapter's name
        version = f"(adapter {importlib.metadata.version(distribution)})"
    return {
        "framework": framework,
        "version": version,
        "adapter": distribution,
        "recipes": {name: _rows(adapter, name) for name in recipes},
    }


def _rows(adapter: Any, name: str) -> list[dict[str, Any]] | dict[str, str]:
    """The recipe's rows, or ``{"refused": why}`` for a recipe the adapter refuses by name."""
    try:
        return [dataclasses.asdict(row) for row in adapter.describe(load_recipe(name)).mappings]
    except RecipeError as error:
        return {"refused": str(error)}


def main(framework: str, out: str) -> None:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(mapping_tables(framework), indent=1, default=str) + "\n")
    print(f"{framework} mapping tables: {path}", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
