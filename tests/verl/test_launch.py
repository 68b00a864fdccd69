"""``describe`` and the launcher: every override is valid for verl's own Hydra config, and the commands print it."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import verl_config
from hydra import compose, initialize_config_module
from omegaconf import open_dict
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.algorithms import lr_multiplier
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.reaper import fate_shared
from agentrl_plugins.runs.rundir import RunDir

from agentrl_tinyagent.cache import model_path
from agentrl_verl import launch
from agentrl_verl.config import LaunchPaths, describe, hydra_value
from agentrl_verl.names import agent_loop_name
from agentrl_verl.recipe_file import recipe_from_config
from agentrl_verl.registration import RegistrationError

ROOT = Path(__file__).resolve().parents[2]
AGENTRL = [sys.executable, "-c", "from agentrl_plugins.cli import main; main()"]


@pytest.fixture(scope="module")
def deepswe():
    return load_recipe("deepswe_grpopp")


def test_every_recipe_key_is_marked(deepswe):
    config = describe(deepswe)
    keys = {mapping.key for mapping in config.mappings}
    for section in ("environment", "verifier", "advantage", "loss", "correction", "filtering", "rollout", "optim",
                    "train"):
        for key in vars(getattr(deepswe, section)):
            assert f"{section}.{key}" in keys
    assert {mapping.status for mapping in config.mappings} <= {"native", "mapped", "injected", "approximated"}
    assert config.command[:3] == ["python", "-m", "verl.trainer.main_ppo"]


def test_the_overrides_compose_into_verls_config_with_the_recipes_values(deepswe, tmp_path):
    config = verl_config(deepswe, LaunchPaths("/models/m", tmp_path))
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert config.algorithm.adv_estimator == "agentrl_rloo"
    assert actor.loss_agg_mode == "seq-mean-token-sum"
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert actor.use_kl_loss is False and actor.entropy_coeff == 0.0
    assert rollout.agent.default_agent_loop == agent_loop_name("bugfix") and rollout.n == 8
    assert rollout.prompt_length == rollout.response_length == rollout.max_model_len == 36864
    read = recipe_from_config(config)
    assert read.filtering.compact is True and read.advantage.masked_in_baseline is True
    assert read.rollout.max_turns == 50 and read.verifier.names == ["hidden_tests"]
    assert config.reward.custom_reward_function.path == "pkg://agentrl_verl.reward"
    assert config.data.train_files == str(tmp_path / "train.parquet")


def test_verls_own_validation_accepts_the_config(deepswe, tmp_path):
    config = verl_config(deepswe, LaunchPaths("/models/m", tmp_path))
    assert not need_reference_policy(config) and not need_critic(config)
    validate_config(config=config, use_reference_policy=False, use_critic=False)


@pytest.mark.parametrize("schedule, min_lr_ratio", [("cosine", 0.1), ("constant", 0.0)])
def test_verls_own_optimizer_and_scheduler_follow_the_recipe(tmp_path, model, schedule, min_lr_ratio):
    overrides = {"optim.lr_schedule": schedule, "optim.min_lr_ratio": min_lr_ratio, "optim.betas": [0.8, 0.95],
                 "optim.lr": 1e-3, "train.steps": 20}
    config = verl_config(load_recipe("deepswe_grpopp", overrides), LaunchPaths("/models/m", tmp_path))
    optim = config.actor_rollout_ref.actor.optim
    with open_dict(optim):
        optim.total_training_steps = config.trainer.total_training_steps  # as verl's trainer sets it
    engine = SimpleNamespace(optimizer_config=omega_conf_to_dataclass(optim), rank=1)
    optimizer = FSDPEngine._build_optimizer(engine, model)
    scheduler = FSDPEngine._build_lr_scheduler(engine, optimizer)
    assert {tuple(group["betas"]) for group in optimizer.param_groups} == {(0.8, 0.95)}
    learning_rates = []
    for _ in range(20):
        learning_rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert learning_rates == pytest.approx([1e-3 * lr_multiplier(schedule, step, 20, min_lr_ratio)
                                            for step in range(20)], rel=1e-12)


@pytest.mark.parametrize("overrides", [
    {"correction.name": "icepop"}, {"correction.name": "geometric_sequence_mask"},
    {"advantage.estimator": "grpo", "filtering.compact": False, "loss.aggregation": "token-mean"},
    {"loss.aggregation": "seq-mean-token-sum-norm", "train.lora": True, "loss.clip_c": 3.0},
])
def test_other_recipes_compose_too(tmp_path, overrides):
    recipe = load_recipe("deepswe_grpopp", overrides, "laptop")
    config = verl_config(recipe, LaunchPaths("/models/m", tmp_path))
    assert Path(config.agentrl.recipe).name == "recipe.toml"
    assert recipe_from_config(config) == recipe, "every worker reads the whole recipe from the run folder"
    assert recipe_from_config(config).environment == recipe.environment, "the agent loop sees the gym's options"
    if "advantage.estimator" in overrides:
        assert config.algorithm.adv_estimator == "grpo" and config.algorithm.norm_adv_by_std_in_grpo is True
    if overrides.get("loss.aggregation") == "seq-mean-token-sum-norm":
        assert config.actor_rollout_ref.actor.loss_scale_factor == 1024
        assert config.actor_rollout_ref.model.lora_rank == 8 and config.actor_rollout_ref.actor.clip_ratio_c == 3.0


def test_values_survive_hydras_grammar():
    assert hydra_value("0.5_5.0") == "'0.5_5.0'" and hydra_value("pkg://a.b") == "pkg://a.b"
    assert hydra_value(["a", True, None, 1e9]) == "[a,true,null,1000000000.0]"
    assert hydra_value({"renamed_variants": 4, "name": "a b"}) == "{renamed_variants:4,name:'a b'}"


def test_dry_run_prints_the_two_commands_of_a_hand_run_job():
    result = subprocess.run(AGENTRL + ["run", "deepswe_grpopp", "--framework", "verl", "--dry-run", "-o",
                                       "train.steps=3", "--report-to", "tensorboard"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    comments = [line for line in result.stdout.splitlines() if line.startswith("#")]
    prepare, train = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert "the run folder" in comments[0] and ("CPU" if not torch.cuda.is_available() else "GPU") in comments[1]
    words = shlex.split(train)
    environment = words[:words.index("python")]
    words = words[len(environment):]
    assert words[1:3] == ["-m", "verl.trainer.main_ppo"]
    settings = dict(word.split("=", 1) for word in words[3:])
    if not torch.cuda.is_available():
        assert "VERL_PLATFORM=cpu" in environment
        assert settings["actor_rollout_ref.rollout.name"] == "agentrl_hf" and settings["trainer.device"] == "cpu"
    for key, value in {"algorithm.adv_estimator": "agentrl_rloo",
                       "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum",
                       "actor_rollout_ref.actor.clip_ratio_low": "0.2",
                       "actor_rollout_ref.actor.clip_ratio_high": "0.28",
                       "actor_rollout_ref.rollout.agent.default_agent_loop": "agentrl_bugfix",
                       "actor_rollout_ref.rollout.mode": "async",
                       "trainer.total_training_steps": "3",
                       "trainer.logger": "[console,tensorboard]",
                       }.items():
        assert settings[key] == value
    assert settings["trainer.default_local_dir"].endswith("/checkpoints")
    run_folder = Path(settings["trainer.default_local_dir"]).parent
    assert f"TENSORBOARD_DIR={run_folder / 'tensorboard'}" in environment
    assert shlex.split(prepare) == ["agentrl", "verl", "prepare", "deepswe_grpopp", "-o", "train.steps=3",
                                    "--run-dir", str(run_folder), "--report-to", "tensorboard"]
    assert settings["data.train_files"] == str(run_folder / "data" / "train.parquet")
    assert settings["+agentrl.recipe"] == str(run_folder / "recipe.toml"), "one channel: the run folder's recipe"
    assert settings["+reward.custom_reward_function.reward_kwargs.recipe"] == settings["+agentrl.recipe"]
    assert not [key for key in settings if key.startswith("+agentrl.") and key != "+agentrl.recipe"]
    assert not run_folder.exists(), "a dry run writes nothing"


def test_prepare_writes_what_the_command_it_prints_reads(tmp_path, model_dir):
    result = subprocess.run(AGENTRL + ["verl", "prepare", "deepswe_grpopp", "--run-dir", str(tmp_path / "run"),
                                       "--model", str(model_dir), "-o", "environment.options={}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    settings = dict(word.split("=", 1) for word in shlex.split(result.stdout.strip().splitlines()[-1])
                    if "=" in word and not word.isupper())
    run = RunDir(tmp_path / "run")
    assert run.load_recipe().environment.options == {}
    assert settings["+agentrl.recipe"] == str(run.recipe_file)
    assert Path(settings["data.train_files"]).is_file() and Path(settings["data.val_files"]).is_file()
    assert settings["actor_rollout_ref.model.path"] == str(model_dir)


def fake_main_ppo(launched: list, report: bool = True) -> type:
    """A stand-in for ``subprocess.Popen`` of main_ppo, for a faked launch: checks main_ppo runs under the reaper,
    records its command (inside the reaper) and environment and, with ``report``, leaves what main_ppo leaves when it
    succeeds (verl's recording trainer writes the report)."""

    class MainPPO:
        def __init__(self, cmd: list[str], env: dict[str, str]):
            separator = cmd.index("--")
            assert fate_shared(cmd[separator + 1:]) == cmd  # main_ppo runs under the reaper, tied to the launch
            self.cmd, self.env, self.terminated = cmd[separator + 1:], env, False
            launched.append(self)
            settings = dict(word.split("=", 1) for word in self.cmd[3:])
            if report:
                (Path(settings["+agentrl.recipe"]).parent / "report.md").write_text("report")

        def terminate(self) -> None:
            self.terminated = True

        def wait(self) -> int:
            return 0

    return MainPPO


def test_a_launch_writes_the_run_folder_dataset_and_model_then_runs_main_ppo(tmp_path, monkeypatch, model_dir):
    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path / "cache"))
    shutil.copytree(model_dir, model_path(0))  # TinyAgent's cached warm start (built with TRL, not here)
    launched: list = []
    monkeypatch.setattr(launch, "subprocess", SimpleNamespace(Popen=fake_main_ppo(launched)))
    recipe = load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop")
    run_dir = launch.launch(recipe, RunOptions(run_dir=tmp_path / "run"))
    (trainer,) = launched
    cmd = trainer.cmd
    assert cmd[:3] == [sys.executable, "-m", "verl.trainer.main_ppo"]
    settings = dict(word.split("=", 1) for word in cmd[3:])
    assert settings["data.train_files"] == str(run_dir / "data" / "train.parquet")
    assert Path(settings["data.train_files"]).is_file() and Path(settings["data.val_files"]).is_file()
    assert (Path(settings["actor_rollout_ref.model.path"]) / "config.json").is_file()
    assert settings["trainer.default_local_dir"] == str(run_dir / "checkpoints")
    assert RunDir(run_dir).load_recipe().train.steps == 2
    assert not trainer.terminated


def test_a_main_ppo_that_leaves_no_report_is_an_error(tmp_path, monkeypatch, model_dir):
    monkeypatch.setattr(launch, "subprocess", SimpleNamespace(Popen=fake_main_ppo([], report=False)))
    with pytest.raises(AgentRLError, match="without agentrl's report"):
        launch.launch(load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop"),
                      RunOptions(run_dir=tmp_path / "run", model=str(model_dir)))


def test_a_failed_registration_check_beside_the_start_up_stops_main_ppo_and_is_raised(tmp_path, monkeypatch,
                                                                                        model_dir):
    launched: list = []
    monkeypatch.setattr(launch, "subprocess", SimpleNamespace(Popen=fake_main_ppo(launched, report=False)))
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")  # verl's switch that keeps agentrl's plugin out
    with pytest.raises(RegistrationError, match="VERL_USE_EXTERNAL_PLUGINS"):
        launch.launch(load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop"),
                      RunOptions(run_dir=tmp_path / "run", model=str(model_dir)))
    (trainer,) = launched
    assert trainer.terminated, "main_ppo, started while the check ran, is stopped"


def test_a_launch_without_tinyagents_warm_start_is_a_clear_error_before_any_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(AgentRLError, match=r"warm start is not in the cache .*built with TRL.*--model DIR"):
        launch.launch(load_recipe("deepswe_grpopp", profile="laptop"), RunOptions(run_dir=tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_a_launch_names_its_run_folder_once_even_when_the_clock_ticks(tmp_path, monkeypatch, model_dir):
    ticks = iter(range(100))
    monkeypatch.setattr(RunDir, "default", classmethod(lambda cls, recipe, framework, root=Path("runs"):
                                                       cls(tmp_path / f"run-at-second-{next(ticks)}")))
    launched: list = []
    monkeypatch.setattr(launch, "subprocess", SimpleNamespace(Popen=fake_main_ppo(launched)))
    run_dir = launch.launch(load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop"),
                            RunOptions(model=str(model_dir)))
    settings = dict(word.split("=", 1) for word in launched[0].cmd[3:])
    assert run_dir == tmp_path / "run-at-second-0"
    assert settings["trainer.default_local_dir"] == str(run_dir / "checkpoints")
    assert settings["hydra.run.dir"] == str(run_dir / "hydra")
    assert (run_dir / "run.json").is_file()


def test_recipes_show_prints_the_table_overrides_and_command():
    result = subprocess.run(AGENTRL + ["recipes", "show", "deepswe_grpopp", "--framework", "verl"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for text in ("advantage.estimator", "injected", "native", "mapped", "algorithm.adv_estimator",
                 "GPU variant", "agentrl verl prepare RECIPE --run-dir RUN_DIR", "python -m verl.trainer.main_ppo"):
        assert text in result.stdout


def test_ranks_over_nodes_reach_verl_and_a_running_cluster_gets_the_launch_variables(deepswe, tmp_path, monkeypatch,
                                                                                    model_dir):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = launch.plan(deepswe, RunOptions(run_dir=tmp_path / "a", model=str(model_dir), ranks=2, extra={"cpu": True}))
    settings = dict(word.split("=", 1) for word in local.command[3:])
    assert (settings["trainer.nnodes"], settings["trainer.n_gpus_per_node"]) == ("1", "2")
    assert settings["+ray_kwargs.ray_init.num_gpus"] == "2", "verl's own local cluster gets a slot per rank"
    assert local.env["RAY_enable_worker_prestart"] == "0", "verl's own local cluster starts no idle workers"
    assert not [key for key in settings if ".env_vars.RAY_" in key], "the cluster's settings, not its workers'"
    words = [word for word in local.command[3:] if not word.startswith("hydra.")]
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        assert compose("ppo_trainer", overrides=words).ray_kwargs.ray_init.include_dashboard is False
        yours = compose("ppo_trainer", overrides=[*words, "ray_kwargs.ray_init.include_dashboard=true"])
    assert yours.ray_kwargs.ray_init.include_dashboard is True, "the dashboard comes back with one word"
    monkeypatch.setenv("RAY_prestart_worker_first_driver", "1")
    yours = launch.plan(deepswe, RunOptions(run_dir=tmp_path / "c", model=str(model_dir), extra={"cpu": True}))
    assert "RAY_prestart_worker_first_driver" not in yours.env, "the user's own setting wins"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    joined = launch.plan(deepswe, RunOptions(run_dir=tmp_path / "b", model=str(model_dir), ranks=4, nodes=2,
                                             extra={"cpu": True}))
    settings = dict(word.split("=", 1) for word in joined.command[3:])
    assert (settings["trainer.nnodes"], settings["trainer.n_gpus_per_node"]) == ("2", "2")
    assert not [key for key in settings if key.endswith(("num_gpus", "num_cpus"))], \
        "a running cluster brings its own resources (ray.init refuses them with an address)"
    assert settings["+ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM"] == "cpu"
    assert not [name for name in joined.env if name.startswith("RAY_")], "a running cluster keeps its settings"


@pytest.mark.parametrize("ranks, nodes, address, message", [
    (3, 2, "10.0.0.1:6379", "does not spread evenly over --nodes 2"),
    (2, 2, None, "set RAY_ADDRESS"),
    (0, 1, None, "from 1"),
])
def test_a_layout_that_cannot_launch_is_refused_before_any_folder(deepswe, tmp_path, monkeypatch, model_dir, ranks,
                                                                  nodes, address, message):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if address:
        monkeypatch.setenv("RAY_ADDRESS", address)
    with pytest.raises(AgentRLError, match=message):
        launch.plan(deepswe, RunOptions(run_dir=tmp_path / "run", model=str(model_dir), ranks=ranks, nodes=nodes,
                                        extra={"cpu": True}))
    assert not (tmp_path / "run").exists()


def test_a_resumed_run_keeps_its_ranks_and_refuses_others(deepswe, tmp_path, monkeypatch, model_dir):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    run = RunDir(tmp_path / "run")
    run.create(deepswe, "verl", {"model_path": str(model_dir), "ranks": 2, "nodes": 1})
    resumed = launch.plan(deepswe, RunOptions(resume=run.path, extra={"cpu": True}))
    assert (resumed.paths.nodes, resumed.paths.n_gpus) == (1, 2)
    with pytest.raises(AgentRLError, match="trained on 2 ranks.*resume it without --ranks"):
        launch.plan(deepswe, RunOptions(resume=run.path, ranks=1, extra={"cpu": True}))
