"""Recipes: shipped files validate, unknown keys and wrong types fail with close matches, overrides, extends."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from agentrl_plugins.errors import RecipeError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import build_recipe, get_value, load_recipe, parse_overrides, resolve_raw

MANAGER = PluginManager(load_entry_points=False)
SHIPPED = ["deepswe_grpopp", "grpo", "deepseekmath_grpo", "dr_grpo", "dapo", "rloo"]


def load(name, overrides=None, profile=None):
    return load_recipe(name, overrides, profile, plugin_manager=MANAGER)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipes_validate_with_every_profile(name):
    recipe = load(name)
    assert recipe.name == name
    for profile in recipe.profiles:
        assert load(name, profile=profile).name == name


def test_deepswe_grpopp_carries_the_published_values_and_their_sources():
    recipe = load("deepswe_grpopp")
    assert (recipe.advantage.estimator, recipe.loss.aggregation) == ("rloo", "seq-mean-token-sum")
    assert (recipe.loss.clip_low, recipe.loss.clip_high, recipe.loss.kl_coef, recipe.loss.entropy_coef) == (
        0.2, 0.28, 0.0, 0.0)
    assert (recipe.rollout.group_size, recipe.rollout.tasks_per_step, recipe.rollout.max_turns) == (8, 8, 50)
    assert recipe.rollout.timeout_s == 5400.0 and recipe.optim.lr == 1e-6
    assert recipe.filtering.compact and set(recipe.filtering.reasons) == {"max_context", "max_turns", "timeout"}
    assert "rloo" in recipe.sources["advantage.estimator"]
    assert {c.key for c in recipe.choices} == {"loss.aggregation", "rollout.timeout_s", "advantage.masked_in_baseline"}
    for choice in recipe.choices:
        assert any("default" in who for who in choice.options.values()) and choice.why


def test_extends_merges_the_parent_beneath():
    raw = resolve_raw("dapo", lambda n: MANAGER.get("recipe", n).path)
    assert raw["loss"]["clip_high"] == 0.28 and raw["rollout"]["group_size"] == 8
    assert load("dapo").advantage.estimator == "grpo"


def test_unknown_keys_are_errors_with_close_matches():
    raw = {"name": "x", "description": "d", "loss": {"clip_hgh": 0.3}}
    with pytest.raises(RecipeError, match=r"unknown key 'loss.clip_hgh'\. Did you mean 'clip_high'"):
        build_recipe(raw)
    with pytest.raises(RecipeError, match="Did you mean 'rollout'"):
        build_recipe({"name": "x", "description": "d", "rolout": {}})
    with pytest.raises(RecipeError, match="Did you mean 'loss.clip_high'"):
        get_value(load("grpo"), "loss.clip_hi")


def test_wrong_types_and_values_are_errors():
    with pytest.raises(RecipeError, match="'rollout.group_size' must be int, got str"):
        build_recipe({"name": "x", "description": "d", "rollout": {"group_size": "8"}})
    with pytest.raises(RecipeError, match="'train.lora' must be bool"):
        build_recipe({"name": "x", "description": "d", "train": {"lora": 1}})
    with pytest.raises(RecipeError, match="must be one of .* Did you mean 'token-mean'"):
        build_recipe({"name": "x", "description": "d", "loss": {"aggregation": "token_mean"}})
    with pytest.raises(RecipeError, match="unknown reason 'max_step'"):
        build_recipe({"name": "x", "description": "d", "filtering": {"reasons": ["max_step"]}})
    with pytest.raises(RecipeError, match="needs loss.norm_constant"):
        build_recipe({"name": "x", "description": "d", "loss": {"aggregation": "seq-mean-token-sum-norm"}})
    assert build_recipe({"name": "x", "description": "d", "optim": {"lr": 1}}).optim.lr == 1.0


@pytest.mark.parametrize("optim, message", [
    ({"lr_schedule": "linear"}, r"must be one of \['constant', 'cosine'\], got 'linear'"),
    ({"lr_schedule": "cosin"}, "Did you mean 'cosine'"),
    ({"min_lr_ratio": 1.5}, r"optim.min_lr_ratio must lie in \[0, 1\], got 1.5"),
    ({"betas": [0.9]}, r"optim.betas must be two numbers in \[0, 1\)"),
    ({"betas": [0.9, 1.0]}, r"optim.betas must be two numbers"),
    ({"betas": 0.9}, "'optim.betas' must be a list"),
])
def test_optimizer_settings_are_checked(optim, message):
    with pytest.raises(RecipeError, match=message):
        build_recipe({"name": "x", "description": "d", "optim": optim})


def test_the_optimizer_defaults_are_verls_and_overrides_reach_them():
    optim = load("deepswe_grpopp").optim
    assert (optim.lr_schedule, optim.min_lr_ratio, optim.betas) == ("constant", 0.0, [0.9, 0.999])
    optim = load("deepswe_grpopp", parse_overrides(["optim.lr_schedule=cosine", "optim.betas=[0.8, 0.95]"])).optim
    assert (optim.lr_schedule, optim.betas) == ("cosine", [0.8, 0.95])


def test_overrides_are_typed_and_validated():
    overrides = parse_overrides(["loss.clip_high=0.3", "verifier.names=['public_tests']", "advantage.estimator=grpo"])
    recipe = load("deepswe_grpopp", overrides)
    assert recipe.loss.clip_high == 0.3 and recipe.verifier.names == ["public_tests"]
    assert recipe.advantage.estimator == "grpo"
    with pytest.raises(RecipeError, match="Did you mean 'loss.clip_high'"):
        load("grpo", {"loss.clip_hihg": 0.3})
    with pytest.raises(RecipeError, match="not KEY=VALUE"):
        parse_overrides(["loss.clip_high"])
    with pytest.raises(RecipeError, match="'rollout.group_size' must be int"):
        load("grpo", parse_overrides(["rollout.group_size=eight"]))


def test_profiles_apply_before_overrides_and_unknown_profiles_fail():
    laptop = load("deepswe_grpopp", {"rollout.max_turns": 4}, profile="laptop")
    assert laptop.rollout.max_context_tokens == 1024 and laptop.rollout.max_turns == 4
    assert laptop.loss.clip_high == 0.28
    with pytest.raises(RecipeError, match="Did you mean 'laptop'"):
        load("grpo", profile="lapto")


def test_extends_cycles_are_reported(tmp_path):
    (tmp_path / "a.toml").write_text('name = "a"\ndescription = "d"\nextends = "b"\n')
    (tmp_path / "b.toml").write_text('name = "b"\ndescription = "d"\nextends = "a"\n')
    with pytest.raises(RecipeError, match="extends itself"):
        resolve_raw(str(tmp_path / "a.toml"), lambda n: tmp_path / f"{n}.toml")


def test_recipes_ship_inside_the_wheel(tmp_path, request):
    root = request.config.rootpath
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(root)], check=True)
    wheel = next(tmp_path.glob("agentrl_plugins-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for name in SHIPPED:
        assert f"agentrl_plugins/recipes/{name}.toml" in names


def test_the_schema_names_no_component_so_a_runnable_recipe_must(tmp_path):
    bare = build_recipe({"name": "bare", "description": "d"})
    assert (bare.environment.name, bare.verifier.names, bare.train.model) == ("", [], "")
    (tmp_path / "bare.toml").write_text('name = "bare"\ndescription = "d"\n[verifier]\nnames = ["v"]\n'
                                        '[train]\nmodel = "m"\n')
    with pytest.raises(RecipeError, match=r"environment.name must name an environment; .*extends = \"grpo\""):
        load_recipe(str(tmp_path / "bare.toml"))
    assert load_recipe("grpo").environment.name == "bugfix"


def test_a_recipe_for_another_environment_does_not_inherit_its_parents_profiles(tmp_path):
    (tmp_path / "other.toml").write_text('name = "other"\ndescription = "d"\nextends = "grpo"\n'
                                         '[environment]\nname = "arithmetic"\n')
    (tmp_path / "same.toml").write_text('name = "same"\ndescription = "d"\nextends = "grpo"\n'
                                        '[loss]\nclip_high = 0.3\n')
    assert load(str(tmp_path / "other.toml")).profiles == {}
    assert load(str(tmp_path / "same.toml")).profiles.keys() == load("grpo").profiles.keys() == {"laptop"}


@pytest.mark.parametrize("override, message", [
    ("optim.lr=nan", "optim.lr must be finite and > 0, got nan"),
    ("optim.lr=0", "optim.lr must be finite and > 0, got 0"),
    ("train.eval_every=0", "train.eval_every must be at least 1, got 0"),
    ("train.steps=-1", "train.steps must be at least 1, got -1"),
    ("rollout.tasks_per_step=0", "rollout.tasks_per_step must be at least 1, got 0"),
    ("rollout.top_p=0", "rollout.top_p must be in (0, 1], got 0"),
    ("rollout.temperature=-0.5", "rollout.temperature must be finite and >= 0, got -0.5"),
    ("rollout.timeout_s=inf", "rollout.timeout_s must be finite and > 0, got inf"),
    ("loss.clip_low=1.0", "loss.clip_low must be in [0, 1), got 1.0"),
    ("loss.clip_c=1.0", "loss.clip_c must be finite and > 1 (or unset), got 1.0"),
    ("correction.low=3.0", "correction.low must not exceed correction.high, got 3.0 and 2.0"),
    ("train.seed=100000000000000000000000000000", "'train.seed' must fit a 64-bit integer, got 1" + "0" * 29),
    ("train.seed=4294967296", "train.seed must be in [0, 2**32)"),
    ("rollout.group_size=100000000000000000000000000000000", "'rollout.group_size' must fit a 64-bit integer"),
])
def test_an_out_of_range_value_names_the_key_its_range_and_the_value(override, message):
    with pytest.raises(RecipeError) as error:
        load_recipe("grpo", parse_overrides([override, "correction.high=2.0"] if "correction" in override
                                            else [override]))
    assert message in str(error.value)


def test_an_override_is_one_toml_value():
    with pytest.raises(RecipeError, match="one TOML value on one line"):
        parse_overrides(["loss.clip_high=0.3\n[train]\nsteps = 1"])


@pytest.mark.parametrize("make, message", [
    (lambda path: path.write_bytes(b"\x00\x01\xff"), "not a text file (TOML is UTF-8)"),
    (lambda path: path.mkdir(), "cannot read it: Is a directory"),
    (lambda path: None, "cannot read it: No such file or directory"),
    (lambda path: path.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n"), "nested too deeply"),
])
def test_a_recipe_file_that_cannot_be_read_is_an_error_not_a_traceback(tmp_path, make, message):
    path = tmp_path / "bad.toml"
    make(path)
    with pytest.raises(RecipeError) as error:
        load_recipe(str(path))
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)


def test_an_extends_cycle_through_file_paths_is_named(tmp_path):
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    first.write_text(f'name = "first"\ndescription = "x"\nextends = "{second}"\n')
    second.write_text(f'name = "second"\ndescription = "x"\nextends = "{first}"\n')
    with pytest.raises(RecipeError, match="recipe extends itself through .*first.toml -> .*second.toml -> .*first"):
        load_recipe(str(first))


@pytest.mark.parametrize("body, message", [
    ("[profiles]\nlaptop = 3\n", "'profiles.laptop' must be a table, got int 3"),
    ("choices = 3\n", "'choices' must be a list, got int 3"),
    ("[[choices]]\n", "a choices entry needs choices.key, choices.options, choices.why"),
    ('[[choices]]\nkey = "loss.clip_high"\n', "a choices entry needs choices.options, choices.why"),
])
def test_every_malformed_recipe_shape_is_an_error_not_a_traceback(tmp_path, body, message):
    path = tmp_path / "shape.toml"
    path.write_text(f'name = "shape"\ndescription = "x"\nextends = "grpo"\n{body}')
    with pytest.raises(RecipeError) as error:
        load_recipe(str(path))
    assert message in str(error.value)
