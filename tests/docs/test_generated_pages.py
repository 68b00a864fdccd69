"""The generated documentation pages say what the code says, and are the ones the site was built from."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
from pathlib import Path

import pytest

from agentrl_plugins import hookspecs
from agentrl_plugins.recipe import load_recipe, recipe_to_dict
from agentrl_plugins.recipe_schema import SECTIONS
from agentrl_plugins.runs.metrics import METRIC_NAMES
from agentrl_plugins.testing import fresh_environment

DOCS = Path(__file__).resolve().parents[2] / "docs"


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of the first table after ``heading``."""
    lines = markdown[markdown.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_generated_files_on_disk_are_the_current_ones(pages, tables):
    stale = [path for path, text in pages.fragments(tables).items() if (DOCS / path).read_text() != text]
    assert not stale, f"generated pages older than the code: {stale}; run ./scripts/build_docs.sh"


@pytest.mark.parametrize("name", ["grpo", "deepswe_grpopp", "dapo", "dr_grpo", "rloo"])
def test_a_recipe_page_lists_every_key_with_its_value_and_source(pages, tables, name):
    recipe = load_recipe(name)
    data = recipe_to_dict(recipe)
    expected = [[f"`{section}.{key}`", "*(unset)*" if value is None else f"`{json.dumps(value)}`",
                 recipe.sources.get(f"{section}.{key}", "")]
                for section in SECTIONS for key, value in data[section].items()]
    rows = table_rows(pages.render_recipe(name, tables), "## Settings")
    assert [[row[0], row[1], row[3]] for row in rows] == expected


def test_the_deepswe_page_names_each_published_disagreement_and_the_choice(pages, tables):
    page = pages.render_recipe("deepswe_grpopp", tables)
    recipe = load_recipe("deepswe_grpopp")
    assert len(recipe.choices) == 3
    for choice in recipe.choices:
        section, _, key = choice.key.partition(".")
        chosen = json.dumps(recipe_to_dict(recipe)[section][key])
        assert f"### `{choice.key}`: `{chosen}`" in page and choice.why in page
        assert [row[0] for row in table_rows(page, f"### `{choice.key}`")] == [f"`{o}`" for o in choice.options]


@pytest.mark.parametrize("framework", ["trl", "verl", "openrlhf"])
def test_a_recipe_page_has_every_mapping_row_its_adapter_described(pages, tables, framework):
    heading = f"### {pages.FRAMEWORK_NAMES[framework]}\n"
    for name in pages.shipped_recipes():
        page = pages.render_recipe(name, tables)
        described = tables[framework]["recipes"][name]
        if isinstance(described, dict):  # a recipe the adapter refuses: the page says so, with the reason
            assert f"{heading}\nRefused by `" in page and described["refused"].split(":")[0] in page
            continue
        rows = table_rows(page, heading)
        assert [(row[0], row[3]) for row in rows] == [(f"`{r['key']}`", r["status"]) for r in described]
        assert {r["status"] for r in described} <= set(pages.STATUSES)


def test_a_missing_framework_table_stops_the_build_naming_how_to_make_it(pages, tmp_path, monkeypatch):
    (tmp_path / "mappings").mkdir()
    for framework in ("trl", "openrlhf"):
        (tmp_path / "mappings" / f"{framework}.json").write_text((pages.GENERATED / "mappings" /
                                                                   f"{framework}.json").read_text())
    monkeypatch.setattr(pages, "GENERATED", tmp_path)
    with pytest.raises(pages.DocsError, match=r"verl mapping table .* is missing.*build_verl_env\.sh"):
        pages.load_tables()


def test_a_recipe_without_a_nav_entry_stops_the_build(pages):
    with pytest.raises(pages.DocsError, match="recipes/my_recipe.md"):
        pages.check_nav(["grpo", "my_recipe"])


def test_the_hook_reference_has_every_hook_with_its_exact_signature(pages):
    reference = pages.render_hooks()
    for name in pages.hook_names():
        spec = getattr(hookspecs, name)
        assert f"def {name}{inspect.signature(spec)}: ..." in reference
        assert inspect.cleandoc(spec.__doc__).split(":class:")[0] in reference


def test_the_gym_table_has_every_family_with_its_split_kind_and_fix(pages):
    from bugfix_gym.families import FAMILIES

    rows = table_rows(pages.render_gym_families(), "| family")
    assert [row[:4] for row in rows] == [[f"`{f.name}`", f.bug_kind, f.split, f"`{f.fix_op.name}`"]
                                         for f in FAMILIES]


def test_getting_started_explains_every_metrics_field():
    page = (DOCS / "pages" / "getting-started.md").read_text()
    assert [name for name in METRIC_NAMES if f"| `{name}` |" not in page] == []


def test_the_command_reference_has_every_command_and_option(pages):
    reference = pages.render_cli()
    for name, command in pages.cli_commands():
        assert f"### `{name}`" in reference
        options = [opt for param in command.params for opt in getattr(param, "opts", []) if opt.startswith("-")]
        section = reference.split(f"### `{name}`")[1].split("\n### ")[0]
        assert [opt for opt in options if opt not in section] == []
    assert {"agentrl run", "agentrl recipes show", "agentrl gym simulate"} <= {n for n, _ in pages.cli_commands()}


def test_a_third_party_adapters_table_joins_the_generated_pages(pages, tables, tmp_path):
    toy = fresh_environment(tmp_path / "toy-env", Path(__file__).parents[1] / "fixtures" / "agentrl-toy-framework")
    folder = tmp_path / "mappings"
    folder.mkdir()
    for framework in tables:
        (folder / f"{framework}.json").write_text(json.dumps(tables[framework]))
    subprocess.run([str(toy), str(DOCS / "gen" / "mappings.py"), "toy", str(folder / "toy.json")], check=True)
    with_toy = pages.load_tables(folder)
    assert list(with_toy) == [*tables, "toy"]
    page = pages.render_recipe("grpo", with_toy)
    assert "### toy\n" in page and "Generated by `agentrl-toy-framework`" in page
    assert table_rows(pages.render_recipe_index(with_toy), "| recipe")[0][-1].endswith("native")


def test_every_adapter_maps_every_recipe_key_of_every_shipped_recipe(tables):
    keys = {f"{section}.{field.name}" for section, cls in SECTIONS.items() for field in dataclasses.fields(cls)}
    unmapped = {(framework, recipe): sorted(keys - {row["key"] for row in rows})
                for framework, info in tables.items() for recipe, rows in info["recipes"].items()
                if not isinstance(rows, dict)}
    assert {where: missing for where, missing in unmapped.items() if missing} == {}
    refused = {(framework, recipe) for framework, info in tables.items()
               for recipe, rows in info["recipes"].items() if isinstance(rows, dict)}
    assert refused == set(), "every adapter maps every shipped recipe, per-turn advantages included"
