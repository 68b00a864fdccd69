"""Your own verl config against the recipe, as verl's recording trainer checks it before anything is built: the
core's one rule on verl's own composed config, and the dataset checked against the recipe's environment."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.recipe_schema import EnvironmentSection
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.user_config import ConfigConflictError, same

from agentrl_verl.config import ENTRYPOINT, command, decided, hydra_value, launch_overrides, run_paths
from agentrl_verl.cpu.overrides import cpu_overrides
from agentrl_verl.dataset import write_dataset
from agentrl_verl.own_config import (
    CHECKED_KEY,
    check_in_driver,
    reconcile_config,
    typed_overrides,
    value_at,
    verl_defaults,
)
from agentrl_verl.verl_plugin.trainer import check_dataset, start_recorder

ACTOR = "actor_rollout_ref.actor."


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop")


@pytest.fixture()
def run(tmp_path, recipe, model_dir):
    run = RunDir(tmp_path / "run")
    run.create(recipe, "verl")
    write_dataset(run.path / "data", recipe.environment)
    return run


def composed(overrides: list[str]) -> DictConfig:
    """verl's config as ``main_ppo`` hands it to the trainer: composed from the overrides, then resolved."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    OmegaConf.resolve(config)
    return config


def launch_only(recipe, run, extra: list[str] = ()) -> list[str]:
    """A user's own command: the paths and the recipe file, and none of the recipe's settings."""
    return command(launch_overrides(recipe, run_paths(recipe, run.path, "/models/m")))[3:] + list(extra)


def full(recipe, run) -> list[str]:
    return command({**launch_overrides(recipe, run_paths(recipe, run.path, "/models/m")),
                    **{s.name: s.value for s in decided(recipe)}})[3:]


def test_settings_left_at_verls_defaults_get_the_recipes_values_and_their_followers_too(recipe, run):
    mine, printed = composed(launch_only(recipe, run)), composed(full(recipe, run))
    changes = reconcile_config(mine, recipe)
    for setting in decided(recipe):
        assert same(value_at(mine, setting.name), setting.value), setting.name
    names = {change.name for change in changes}
    assert {"algorithm.adv_estimator", ACTOR + "optim.lr", "data.train_batch_size"} <= names
    followers = {c.name: c for c in changes if c.source.startswith("follows ")}
    assert followers["actor_rollout_ref.rollout.response_length"].source == "follows data.max_response_length"
    for name in followers:
        assert same(value_at(mine, name), value_at(printed, name)), "as if the override had been on the command line"


def test_the_printed_command_already_agrees(recipe, run):
    assert reconcile_config(composed(full(recipe, run)), recipe) == []


def test_every_contradicting_setting_is_named_with_both_values_and_nothing_is_changed(recipe, run):
    mine = composed(launch_only(recipe, run, [ACTOR + "optim.lr=0.5", "actor_rollout_ref.rollout.n=3",
                                              "trainer.v1.trainer_mode=colocate_async"]))
    before = copy.deepcopy(mine)
    with pytest.raises(ConfigConflictError) as error:
        reconcile_config(mine, recipe)
    assert {c.name: (c.yours, c.value) for c in error.value.conflicts} == {
        ACTOR + "optim.lr": (0.5, recipe.optim.lr), "actor_rollout_ref.rollout.n": (3, recipe.rollout.group_size),
        "trainer.v1.trainer_mode": ("colocate_async", "sync")}
    assert "optim.lr=" in str(error.value) and "agentrl verl prepare" in str(error.value)
    assert mine == before


def test_a_warm_up_and_group_filtering_are_refused_as_openrlhfs_adapter_refuses_them(recipe, run):
    overrides = launch_only(recipe, run, [ACTOR + "optim.lr_warmup_steps=3", "algorithm.filter_groups.enable=true"])
    with pytest.raises(ConfigConflictError) as error:
        reconcile_config(composed(overrides), recipe, typed_overrides(overrides))
    assert {c.name: c.yours for c in error.value.conflicts} == {ACTOR + "optim.lr_warmup_steps": 3,
                                                                 "algorithm.filter_groups.enable": True}
    assert "no warm-up" in str(error.value) and "refused in verl and OpenRLHF alike" in str(error.value)


def typed_default(key: str) -> str:
    """An override of ``key`` to verl's own default value (read from verl's config, not written here)."""
    return f"{key}={hydra_value(value_at(verl_defaults(), key))}"


def test_a_typed_value_equal_to_verls_default_is_yours_refused_where_the_recipe_decides(recipe, run):
    overrides = launch_only(recipe, run, [typed_default(ACTOR + "optim.lr"),
                                          typed_default("actor_rollout_ref.rollout.n")])
    mine = composed(overrides)
    with pytest.raises(ConfigConflictError) as error:
        reconcile_config(mine, recipe, typed_overrides(overrides))
    defaults = verl_defaults()
    assert {c.name: (c.yours, c.value) for c in error.value.conflicts} == {
        ACTOR + "optim.lr": (value_at(defaults, ACTOR + "optim.lr"), recipe.optim.lr),
        "actor_rollout_ref.rollout.n": (value_at(defaults, "actor_rollout_ref.rollout.n"), recipe.rollout.group_size)}


def test_a_typed_value_equal_to_verls_default_wins_where_verl_would_derive_it(recipe, run):
    key = "actor_rollout_ref.rollout.response_length"
    overrides = launch_only(recipe, run, [typed_default(key)])
    mine = composed(overrides)
    changes = reconcile_config(mine, recipe, typed_overrides(overrides))
    assert same(value_at(mine, key), value_at(verl_defaults(), key)) and key not in {c.name for c in changes}
    assert not same(value_at(mine, key), value_at(composed(full(recipe, run)), key)), "not the recipe's follower"


@pytest.fixture()
def hydra_job():
    """Hydra's job config as ``main_ppo``'s driver sees it (``HydraConfig``), set from the composed overrides."""

    def compose_job(overrides: list[str]) -> DictConfig:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            config = compose("ppo_trainer", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(config)
        with open_dict(config):
            del config["hydra"]
        return config

    yield compose_job
    HydraConfig.instance().cfg = None


def test_the_driver_lists_every_setting_with_its_origin_from_what_was_typed(recipe, run, hydra_job, capsys):
    cpu = command(cpu_overrides(recipe.train.seed))[len(ENTRYPOINT):]
    prepared = full(recipe, run) + cpu
    run.update_info(command=ENTRYPOINT + prepared)
    again = next(word for word in prepared if word.startswith("trainer.logger="))
    config = hydra_job(prepared + ["trainer.save_freq=-1", typed_default("trainer.val_only"), again])
    assert check_in_driver(config) and OmegaConf.select(config, CHECKED_KEY)
    assert not check_in_driver(config), "once per run"
    rows = {name: (value, origin) for name, value, origin, *_ in run.run_info()["settings"]}
    assert rows["trainer.save_freq"] == ("-1", "user") and rows["trainer.val_only"] == ("False", "user")
    assert rows["trainer.logger"][1] == "user", "a prepared word you type again is yours"
    assert rows[ACTOR + "optim.lr"] == (repr(recipe.optim.lr), "recipe")
    assert rows["data.train_files"][1] == "project (launch)" and rows["trainer.device"] == ("'cpu'", "project (CPU)")
    printed = capsys.readouterr().err
    assert "3 user" in printed and "project (CPU)" in printed and "trainer.save_freq" in printed
    ran = run.run_info()["command_as_run"]
    assert ran[1:3] == ["-m", "verl.trainer.main_ppo"] and ran[-3:] == ["trainer.save_freq=-1",
                                                                     typed_default("trainer.val_only"), again], \
        "run.json holds the command as it ran, not only the prepared one"


def test_a_conflict_stops_main_ppos_driver_before_ray_starts_with_its_own_type(recipe, run, tmp_path):
    overrides = launch_only(recipe, run, [typed_default(ACTOR + "optim.lr")])
    done = subprocess.run([sys.executable, "-P", "-m", "verl.trainer.main_ppo", *overrides], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path, env={**os.environ, "HYDRA_FULL_ERROR": "1"})
    assert done.returncode != 0
    assert "agentrl_plugins.user_config.ConfigConflictError: your verl config contradicts" in done.stderr
    assert ACTOR + "optim.lr" in done.stderr and "ray init kwargs" not in done.stdout + done.stderr


def test_a_setting_the_recipe_leaves_open_stays_yours(recipe, run):
    mine = composed(launch_only(recipe, run, [ACTOR + "ppo_max_token_len_per_gpu=4096", "trainer.save_freq=-1"]))
    reconcile_config(mine, recipe)
    assert mine.actor_rollout_ref.actor.ppo_max_token_len_per_gpu == 4096 and mine.trainer.save_freq == -1


def test_the_trainer_checks_and_lists_before_anything_is_built(recipe, run, capsys):
    mine = composed(launch_only(recipe, run))
    recorder = start_recorder(mine)
    assert recorder is not None and recorder.run.path == run.path
    assert "where each comes from" in capsys.readouterr().err
    assert ["algorithm.adv_estimator", "'gae'", "'agentrl_rloo'", "advantage.estimator='rloo'"] in \
        run.run_info()["config_changes"]
    assert ["algorithm.adv_estimator", "'agentrl_rloo'", "recipe", "'gae'", "advantage.estimator='rloo'"] in \
        run.run_info()["settings"]
    assert start_recorder(composed([])) is None, "without +agentrl.recipe it is verl's own trainer"


def test_a_dataset_written_for_other_options_or_none_at_all_is_refused(recipe, run, tmp_path):
    write_dataset(tmp_path / "plain", EnvironmentSection("bugfix"))
    elsewhere = composed(launch_only(recipe, run, [f"data.train_files={tmp_path / 'plain' / 'train.parquet'}"]))
    with pytest.raises(AgentRLError, match=r"options \{\}.*renamed_variants.*agentrl verl prepare"):
        check_dataset(elsewhere, recipe)
    missing = composed(launch_only(recipe, run, [f"data.train_files={Path('/nowhere/train.parquet')}"]))
    with pytest.raises(AgentRLError, match="is not the agentrl dataset"):
        check_dataset(missing, recipe)
