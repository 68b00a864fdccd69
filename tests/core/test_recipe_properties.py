"""Property-based tests over the recipe schema: any value, any override text, any table is a recipe or a RecipeError."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from agentrl_plugins.cli import build_app
from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import (
    RANGES,
    SECTIONS,
    apply_overrides,
    build_recipe,
    get_value,
    load_recipe,
    parse_overrides,
    recipe_to_dict,
)

MANAGER = PluginManager(load_entry_points=False)
BASE = load_recipe("deepswe_grpopp", plugin_manager=MANAGER)
KEYS = sorted(f"{section}.{field.name}" for section, cls in SECTIONS.items() for field in dataclasses.fields(cls))
SCALARS = (st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                          max_size=3), max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from(sorted(RANGES)), value=VALUES)
def test_a_range_checked_key_takes_a_value_in_range_or_names_itself(key, value):
    try:
        recipe = apply_overrides(BASE, {key: value})
    except RecipeError as error:
        assert key.split(".")[1] in str(error)
    else:
        allowed, _ = RANGES[key]
        assert allowed(get_value(recipe, key))


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from(KEYS), value=VALUES)
def test_any_value_for_any_key_is_a_recipe_or_a_recipe_error(key, value):
    try:
        recipe = apply_overrides(BASE, {key: value})
    except RecipeError:
        return
    assert get_value(recipe, key) == value or isinstance(value, int)  # ints widen to floats


@settings(max_examples=300, deadline=None)
@given(items=st.lists(st.text(max_size=30), max_size=3))
def test_any_override_text_parses_to_values_or_a_recipe_error(items):
    try:
        parsed = parse_overrides(items)
    except RecipeError:
        return
    assert len(parsed) <= len(items)


@settings(max_examples=300, deadline=None)
@given(section=st.sampled_from(sorted(SECTIONS)), table=st.dictionaries(st.text(max_size=12), VALUES, max_size=4))
def test_any_section_table_is_a_recipe_or_a_recipe_error(section, table):
    raw = recipe_to_dict(BASE)
    raw[section] = table
    try:
        build_recipe(raw)
    except RecipeError:
        pass


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(KEYS), text=st.text(max_size=20).filter(lambda text: "\x00" not in text))
def test_the_cli_never_shows_a_traceback_for_an_override(key, text):
    """The command either shows the recipe or raises the project's error, which ``main`` prints as one line."""
    result = CliRunner().invoke(build_app(), ["recipes", "show", "deepswe_grpopp", "-o", f"{key}={text}"])
    assert result.exception is None or isinstance(result.exception, AgentRLError), result.exception
