"""Your own ``train_ppo_ray`` flags against the recipe, as the driver checks them before any actor is built: the core's
one rule on OpenRLHF's own parser, with OpenRLHF's own validation run again on the result."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.user_config import ConfigConflictError

from agentrl_openrlhf.config import CLI_MODULE, RunPaths, decided, flag_words, launch_flags, train_flags
from agentrl_openrlhf.own_flags import install_check, reconcile_flags, run_cli, setting_rows, typed_flags


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("deepswe_grpopp", profile="laptop")


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> RunPaths:
    folder = tmp_path_factory.mktemp("run")
    return RunPaths(folder, folder / "recipe.toml", folder / "prompts.jsonl", folder / "eval_prompts.jsonl",
                    folder / "checkpoints", folder / "final", Path("/models/m"))


def test_flags_left_at_openrlhfs_defaults_get_the_recipes_values_and_openrlhf_derives_the_rest(recipe, paths):
    changes, args = reconcile_flags(flag_words(launch_flags(recipe, paths, "cpu")), recipe)
    names = {change.name for change in changes}
    assert {"algo.advantage.estimator", "actor.adam.lr", "rollout.batch_size", "train.agent_func_path"} <= names
    assert args.algo.advantage.estimator == "rloo" and args.actor.adam.lr == recipe.optim.lr
    assert list(args.actor.eps_clip_low_high) == [recipe.loss.clip_low, recipe.loss.clip_high]
    assert args.rollout.vllm_generate_batch_size == recipe.rollout.tasks_per_step, "OpenRLHF's own derivation"
    assert args.reward.remote_url == ["agent"] and args.critic.model_name_or_path is None


def test_the_printed_command_already_agrees(recipe, paths):
    assert reconcile_flags(flag_words(train_flags(recipe, paths, "cpu")), recipe) == ([], None)


def test_every_contradicting_flag_is_named_with_both_values(recipe, paths):
    mine = flag_words(train_flags(recipe, paths, "cpu")) + ["--actor.adam.lr", "0.5", "--rollout.n_samples_per_prompt",
                                                            "3"]
    with pytest.raises(ConfigConflictError) as error:
        reconcile_flags(mine, recipe)
    assert {c.name: (c.yours, c.value) for c in error.value.conflicts} == {
        "actor.adam.lr": (0.5, recipe.optim.lr), "rollout.n_samples_per_prompt": (3, recipe.rollout.group_size)}
    assert "agentrl openrlhf prepare" in str(error.value)


def test_a_warm_up_and_dynamic_filtering_are_refused_as_verls_adapter_refuses_them(recipe, paths):
    mine = flag_words(launch_flags(recipe, paths, "cpu")) + ["--actor.lr_warmup_ratio", "0.1",
                                                             "--algo.dynamic_filtering_enable"]
    with pytest.raises(ConfigConflictError) as error:
        reconcile_flags(mine, recipe)
    assert {c.name: c.yours for c in error.value.conflicts} == {"actor.lr_warmup_ratio": 0.1,
                                                                 "algo.dynamic_filtering_enable": True}
    assert "refused in verl and OpenRLHF alike" in str(error.value)


def test_a_typed_flag_equal_to_openrlhfs_default_is_yours_refused_where_the_recipe_decides(recipe, paths):
    defaults = run_cli([], "hierarchize")
    typed = {"actor.adam.lr": defaults["actor.adam.lr"], "train.batch_size": defaults["train.batch_size"]}
    with pytest.raises(ConfigConflictError) as error:
        reconcile_flags(flag_words(launch_flags(recipe, paths, "cpu")) + flag_words(typed), recipe)
    assert {c.name: (c.yours, c.value) for c in error.value.conflicts} == {
        "actor.adam.lr": (typed["actor.adam.lr"], recipe.optim.lr),
        "train.batch_size": (typed["train.batch_size"], recipe.rollout.tasks_per_step * recipe.rollout.group_size)}


def test_a_typed_flag_equal_to_openrlhfs_default_wins_where_the_recipe_leaves_it_open(recipe, paths):
    default = run_cli([], "hierarchize")["logger.logging_steps"]
    mine = flag_words(launch_flags(recipe, paths, "cpu")) + ["--logger.logging_steps", str(default)]
    assert typed_flags(mine)["logger.logging_steps"] == default and "actor.adam.lr" not in typed_flags(mine)
    _, args = reconcile_flags(mine, recipe)
    assert args.logger.logging_steps == default
    rows = {row.name: row for row in setting_rows(mine, recipe, flag_words(train_flags(recipe, paths, "cpu")))}
    assert (rows["logger.logging_steps"].origin, rows["logger.logging_steps"].value) == ("user", default)
    assert rows["actor.adam.lr"].origin == "recipe" and rows["ckpt.path"].origin == "project (launch)"
    assert rows["vllm.sync_backend"].origin == "project (CPU)"


def test_a_prepared_flag_you_type_again_is_yours(recipe, paths):
    prepared = flag_words(train_flags(recipe, paths, "cpu"))
    again = ["--ckpt.path", str(train_flags(recipe, paths, "cpu")["ckpt.path"])]
    rows = {row.name: row for row in setting_rows(prepared + again, recipe, prepared)}
    assert rows["ckpt.path"].origin == "user" and rows["vllm.sync_backend"].origin == "project (CPU)"
    rows = {row.name: row for row in setting_rows(prepared, recipe, prepared)}
    assert rows["ckpt.path"].origin == "project (launch)"


def test_a_flag_the_recipe_leaves_open_stays_yours(recipe, paths):
    mine = flag_words(launch_flags(recipe, paths, "cpu")) + ["--logger.logging_steps", "5"]
    _, args = reconcile_flags(mine, recipe)
    assert args.logger.logging_steps == 5


def test_every_decided_flag_is_one_of_openrlhfs(recipe):
    flags = run_cli([], "hierarchize")
    assert [s.name for s in decided(recipe) if s.name not in flags] == []


def test_the_driver_check_wraps_train_ppo_rays_get_strategy(recipe, paths, monkeypatch, capsys, tmp_path):
    seen = []
    main = types.ModuleType("__main__")
    main.__spec__ = SimpleNamespace(name=CLI_MODULE)
    main.get_strategy = seen.append
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", [CLI_MODULE, *flag_words(launch_flags(recipe, paths, "cpu"))])
    run = RunDir(tmp_path / "run")
    run.create(recipe, "openrlhf")
    assert install_check(recipe, run) and install_check(recipe, run)
    args = SimpleNamespace(stale=True)
    main.get_strategy(args)
    assert seen == [args] and not hasattr(args, "stale") and args.algo.advantage.estimator == "rloo"
    assert "where each comes from" in capsys.readouterr().err
    assert ["algo.advantage.estimator", "'gae'", "'rloo'", "advantage.estimator='rloo'"] in \
        run.run_info()["config_changes"]
    assert ["algo.advantage.estimator", "'rloo'", "recipe", "'gae'", "advantage.estimator='rloo'"] in \
        run.run_info()["settings"]
    assert run.run_info()["command_as_run"] == [sys.executable, "-m", CLI_MODULE, *sys.argv[1:]]
