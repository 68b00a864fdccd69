"""TRL in a user's own script: the documented example as written, the recipe against the user's GRPOConfig,
and the agentrl figures in TensorBoard's event files and W&B's offline run files."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from trl import GRPOConfig

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.metrics import LOGGED_PREFIX, TIMING_NAMES, logged_figures
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import tensorboard_scalars, wandb_scalars
from agentrl_plugins.user_config import ConfigConflictError, changes_table

import agentrl_trl
import agentrl_trl.runner as runner
from agentrl_tinyagent.model import build_model
from agentrl_trl import agent_trainer
from agentrl_trl.config import grpo_config
from bugfix_gym import policies
from bugfix_gym.families import FAMILIES

PAGE = Path(__file__).parents[2] / "docs" / "pages" / "own-setup" / "trl.md"
SMALL = {"rollout.group_size": 2, "rollout.tasks_per_step": 2, "train.steps": 1, "train.eval_episodes_per_task": 1}


def assert_figures_logged(scalars: dict[str, dict[int, float]], run: RunDir) -> None:
    """Each row of ``metrics.jsonl`` is in TensorBoard, figure by figure (transformers files them under train/)."""
    rows = run.read_metrics()
    assert rows, "no metrics.jsonl rows"
    for row in rows:
        for name, value in logged_figures(row).items():
            if name.removeprefix(LOGGED_PREFIX) not in TIMING_NAMES:
                assert scalars[f"train/{name}"][row.step] == pytest.approx(value, rel=1e-6), (name, row.step)


def test_the_pages_example_trains_as_written_and_tensorboard_holds_the_agentrl_figures(tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "recipe 'deepswe_grpopp' set" in done.stderr and "loss_type" in done.stderr
    run = RunDir(tmp_path / "out" / "agentrl")
    assert [row.step for row in run.read_metrics()] == [0, 1, 2] and run.report_file.exists()
    assert [name for name, *_ in run.run_info()["config_changes"]][:1] == ["loss_type"]
    scalars = tensorboard_scalars(tmp_path / "out" / "runs")
    assert {"train/loss", "train/entropy"} <= set(scalars)
    assert_figures_logged(scalars, run)


def test_a_plain_grpo_config_takes_the_recipe_and_keeps_what_it_leaves_open(tmp_path, tokenizer, capfd):
    recipe = load_recipe("deepswe_grpopp", SMALL, "laptop")
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", save_total_limit=3,
                      warmup_steps=0)
    trainer = agent_trainer(recipe, build_model(tokenizer, seed=0), tokenizer, args)
    trainer.episode_rollout.service.close()
    config = trainer.args
    assert (config.loss_type, config.epsilon_high, config.learning_rate) == ("luspo", 0.28, 5e-4)
    assert (config.per_device_train_batch_size, config.num_generations, config.max_steps) == (4, 2, 1)
    assert config.save_total_limit == 3 and config.output_dir == str(tmp_path / "out")
    table = capfd.readouterr().err
    for setting, default, value in [("loss_type", "'dapo'", "'luspo'"), ("learning_rate", "1e-06", "0.0005"),
                                    ("logging_steps", "10", "1")]:
        assert re.search(rf"{setting} +{re.escape(default)} +{re.escape(value)} ", table), setting
    assert "learning_rate" in json.dumps(RunDir(tmp_path / "out" / "agentrl").run_info()["config_changes"])


def test_the_pages_table_is_what_a_plain_grpo_config_prints():
    _, changes = grpo_config(load_recipe("deepswe_grpopp"), GRPOConfig(output_dir="out", use_cpu=True))
    printed = [line for line in changes_table(changes, "GRPOConfig", "deepswe_grpopp").splitlines()
               if not set(line) <= {"-", " "}]
    (page,) = re.findall(r"```text\n(recipe 'deepswe_grpopp' set .*?)```", PAGE.read_text(), re.S)
    assert page.splitlines() == printed


def test_a_grpo_config_that_contradicts_the_recipe_names_every_setting_before_anything_is_built(tmp_path,
                                                                                                 tokenizer):
    recipe = load_recipe("deepswe_grpopp", SMALL, "laptop")
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, learning_rate=1e-5, loss_type="grpo",
                      logging_steps=5)
    with pytest.raises(ConfigConflictError) as error:
        agent_trainer(recipe, build_model(tokenizer, seed=0), tokenizer, args)
    assert {c.name: (c.yours, c.value) for c in error.value.conflicts} == {
        "learning_rate": (1e-5, 5e-4), "loss_type": ("grpo", "luspo"), "logging_steps": (5, 1)}
    assert "optim.lr=0.0005" in str(error.value) and "load_recipe" in str(error.value)
    assert not (tmp_path / "out").exists()


def test_a_lora_config_of_yours_follows_the_same_rule(tmp_path, tokenizer):
    from peft import LoraConfig

    recipe = load_recipe("deepswe_grpopp", SMALL, "laptop")
    with pytest.raises(ConfigConflictError, match=r"peft_config +True +False +train\.lora=False"):
        agent_trainer(recipe, build_model(tokenizer, seed=0), tokenizer, run_dir=tmp_path / "run",
                      peft_config=LoraConfig(r=4))


@pytest.mark.parametrize("logger", ["tensorboard", "wandb"])
def test_agentrl_run_report_to_writes_the_figures_into_the_run_folder(logger, tmp_path, tokenizer, scripted,
                                                                     monkeypatch):
    every_family = {family.name: [policies.solver(family), policies.hacker(family)] for family in FAMILIES}
    monkeypatch.setattr(runner, "load_policy", lambda path: (build_model(tokenizer, 0), tokenizer))
    monkeypatch.setattr(runner, "hf_generator_factory", lambda tok: scripted(every_family))
    for variable in ("TENSORBOARD_LOGGING_DIR", "WANDB_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    recipe = load_recipe("deepswe_grpopp", SMALL, "laptop")
    folder = runner.run(recipe, RunOptions(run_dir=tmp_path / "run", report_to=(logger,)))
    if logger == "wandb":  # the run stays open in this process (transformers leaves it to the exit): close it
        import wandb

        wandb.finish()
    read = tensorboard_scalars(folder / "tensorboard") if logger == "tensorboard" else wandb_scalars(folder / "wandb")
    assert_figures_logged(read, RunDir(folder))


def test_a_logger_that_is_not_installed_stops_the_run_before_its_folder_exists(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(AgentRLError, match=r"wandb.*pip install wandb"):
        runner.run(load_recipe("deepswe_grpopp", SMALL, "laptop"),
                   RunOptions(run_dir=tmp_path / "run", report_to=("wandb",)))
    assert not (tmp_path / "run").exists()


def test_the_package_exports_what_the_page_documents():
    assert set(agentrl_trl.__all__) >= {"agent_trainer", "AgentGRPOTrainer", "grpo_config", "EpisodeRollout"}
    assert all(getattr(agentrl_trl, name) is not None for name in agentrl_trl.__all__)
    assert "agentrl_trl.build" in (PAGE.parent.parent / "reference" / "api" / "trl.md").read_text()


def test_a_model_folder_with_a_tokenizer_of_yours_keeps_your_tokenizer(tmp_path, tokenizer):
    build_model(tokenizer, seed=0).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    mine = copy.deepcopy(tokenizer)
    trainer = agent_trainer(load_recipe("deepswe_grpopp", SMALL, "laptop"), tmp_path / "model", mine,
                            run_dir=tmp_path / "run")
    trainer.episode_rollout.service.close()
    assert trainer.processing_class is mine
