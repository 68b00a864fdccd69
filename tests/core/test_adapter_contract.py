"""The mapping contract's check (``agentrl_plugins.testing.mapping_problems``) finds each way to break it."""

from __future__ import annotations

import dataclasses

from agentrl_plugins.adapter import ComponentMapping, FrameworkConfig
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.testing import mapping_problems, recipe_keys


def value(recipe: Recipe, key: str):
    section, _, name = key.partition(".")
    return getattr(getattr(recipe, section), name)


@dataclasses.dataclass
class RowsAdapter:
    """An adapter that describes a recipe with whatever rows ``rows(recipe)`` gives."""

    rows: object

    def describe(self, recipe: Recipe) -> FrameworkConfig:
        return FrameworkConfig("rows", {}, self.rows(recipe))

    def run(self, recipe, options):
        raise NotImplementedError


def complete(recipe: Recipe) -> list[ComponentMapping]:
    return [ComponentMapping(key, value(recipe, key), f"fw.{key}", "native", native={f"fw.{key}": 1})
            for key in recipe_keys()]


def test_a_complete_declaration_holds():
    assert mapping_problems(RowsAdapter(complete), load_recipe("deepswe_grpopp")) == []


def test_each_break_is_named():
    def broken(recipe):
        rows = [row for row in complete(recipe) if row.key != "loss.clip_low"]
        rows.append(dataclasses.replace(rows[0]))
        rows.append(ComponentMapping("loss.nonsense", 1, "fw.x", "native"))
        rows.append(ComponentMapping("optim.lr", 123.0, "fw.y", "guessed", native={"fw.rollout.group_size": 2}))
        return rows

    problems = mapping_problems(RowsAdapter(broken), load_recipe("deepswe_grpopp"))
    first = recipe_keys()[0]
    assert "no row for loss.clip_low" in problems
    assert f"2 rows for {first}" in problems
    assert "a row for loss.nonsense, which is not a recipe key" in problems
    assert any(p.startswith("optim.lr: the row says 123.0") for p in problems)
    assert "optim.lr: unknown status 'guessed'" in problems
    assert any("decided by more than one mapping row" in p for p in problems)
