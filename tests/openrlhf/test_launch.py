"""The launch command: complete and valid for OpenRLHF's own command line, printed by ``--dry-run``, run otherwise."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import flags_of, parse_openrlhf_cli
from typer.testing import CliRunner

from agentrl_plugins.adapter import LEAN_LOCAL_RAY_ENV, RunOptions
from agentrl_plugins.cli import build_app
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.reaper import fate_shared

from agentrl_openrlhf.adapter import OpenRLHFAdapter
from agentrl_openrlhf.cluster import fit_cluster
from agentrl_openrlhf.config import CLI_MODULE, RUNTIME_ENV_HOOK
from agentrl_openrlhf.cpu import BACKEND_ENV, SHIM_PATHS
from agentrl_openrlhf.cpu.launch import RESOURCES_ENV
from agentrl_openrlhf.recipe_env import RECIPE_ENV, RUN_DIR_ENV
from agentrl_openrlhf.shipped import AGENT_EXECUTOR
from agentrl_tinyagent.model import build_model

DEEPSWE_STATUS = {
    "advantage.estimator": "native", "advantage.masked_in_baseline": "native", "loss.aggregation": "patched",
    "loss.clip_low": "native", "loss.clip_high": "native", "loss.kl_coef": "native", "loss.entropy_coef": "native",
    "correction.name": "native", "filtering.compact": "injected", "rollout.group_size": "native",
}


def printed(args: list[str], tmp_path: Path) -> list[str]:
    """The command lines ``--dry-run`` prints on stdout, comments left out (notices go to stderr)."""
    result = CliRunner().invoke(build_app(), ["run", *args, "--framework", "openrlhf", "--dry-run",
                                              "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    return [line for line in result.stdout.splitlines() if line and not line.startswith("#")]


def dry_run(args: list[str], tmp_path: Path) -> list[str]:
    return shlex.split(printed(args, tmp_path)[-1])


def env_of(command: list[str]) -> dict[str, str]:
    """The variables ``env`` sets before ``python -m openrlhf.cli.train_ppo_ray``."""
    assert command[0] == "env" and command[command.index(sys.executable) + 1:][:2] == ["-m", CLI_MODULE]
    return dict(item.split("=", 1) for item in command[1:command.index(sys.executable)])


def test_the_dry_run_command_is_what_openrlhf_parses(tmp_path, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "gpu")
    command = dry_run(["deepswe_grpopp"], tmp_path)
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    run = (tmp_path / "run").resolve()
    assert env_of(command) == {"RAY_RUNTIME_ENV_HOOK": RUNTIME_ENV_HOOK, RECIPE_ENV: str(run / "recipe.toml"),
                               RUN_DIR_ENV: str(run)}
    args = parse_openrlhf_cli(flags_of(command), monkeypatch)
    assert args.train.colocate_all and args.vllm.sync_backend == "nccl" and args.actor.lr_warmup_ratio == 0.0
    assert args.train.agent_func_path == str(AGENT_EXECUTOR) and args.reward.remote_url == ["agent"]
    assert args.algo.advantage.estimator == "rloo" and args.critic.model_name_or_path is None
    assert args.actor.eps_clip_low_high == [0.2, 0.28] and args.algo.kl.init_coef == 0.0
    assert args.actor.entropy_coef is None and args.algo.advantage.is_correction_level == "off"
    rollout = recipe.rollout
    assert (args.rollout.n_samples_per_prompt, args.rollout.batch_size, args.train.batch_size) == (
        rollout.group_size, rollout.tasks_per_step, rollout.group_size * rollout.tasks_per_step)
    assert args.data.max_len == recipe.rollout.max_context_tokens == 1024
    assert args.data.prompt_dataset == str(run / "prompts.jsonl")
    assert args.eval.dataset == str(run / "eval_prompts.jsonl")
    assert (args.data.input_key, args.data.label_key) == ("prompt", "label")
    assert args.actor.adam.lr == recipe.optim.lr and args.train.seed == recipe.train.seed
    assert recipe.optim.lr_schedule == "cosine", "the laptop profile's schedule"
    assert (args.actor.lr_scheduler, args.actor.min_lr_ratio, args.actor.adam.betas) == (
        "cosine_with_min_lr", 0.0, [0.9, 0.999])
    assert args.ckpt.output_dir == str(run / "final")
    assert not (tmp_path / "run").exists(), "a dry run writes nothing"


def test_the_dry_run_prints_the_prepare_step_first_and_prepare_writes_what_the_command_reads(tmp_path, model,
                                                                                            tokenizer):
    model_dir = tmp_path / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    prepare, train = printed(["deepswe_grpopp", "-o", "train.steps=2", "--model", str(model_dir), "--report-to",
                              "tensorboard"], tmp_path)
    run = (tmp_path / "run").resolve()
    assert shlex.split(prepare) == ["agentrl", "openrlhf", "prepare", "deepswe_grpopp", "-o", "train.steps=2",
                                    "--run-dir", str(run), "--model", str(model_dir), "--report-to", "tensorboard"]
    command = shlex.split(train)
    assert command[command.index("--logger.tensorboard_dir") + 1] == str(run / "tensorboard")
    written = CliRunner().invoke(build_app(), shlex.split(prepare)[1:])
    assert written.exit_code == 0, written.output
    assert shlex.split(written.stdout.strip().splitlines()[-1]) == command, "prepare prints the same command"
    assert (run / "prompts.jsonl").is_file() and (run / "eval_prompts.jsonl").is_file()
    assert (run / "train_ppo_ray.sh").read_text().splitlines()[-1] == f"exec {train} \"$@\""


def test_a_logger_openrlhf_lacks_is_refused_with_what_to_do(tmp_path):
    result = CliRunner().invoke(build_app(), ["run", "deepswe_grpopp", "--framework", "openrlhf", "--dry-run",
                                              "--report-to", "trackio"])
    assert result.exit_code != 0 and "use --report-to tensorboard or wandb" in str(result.exception)


def test_wandb_is_switched_on_with_its_key_left_to_wandb(tmp_path, monkeypatch, model, tokenizer):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    for name in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    dry_run = ["run", "deepswe_grpopp", "--framework", "openrlhf", "--dry-run", "--model", str(tmp_path / "model"),
               "--out", str(tmp_path / "run"), "--report-to", "wandb"]
    refused = CliRunner().invoke(build_app(), dry_run)
    assert refused.exit_code != 0 and "Set WANDB_API_KEY" in str(refused.exception)
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    printed = CliRunner().invoke(build_app(), dry_run)
    assert printed.exit_code == 0, printed.output
    assert "--logger.wandb.key from-WANDB_API_KEY" in printed.output and "k" * 40 not in printed.output
    assert f"WANDB_DIR={tmp_path / 'run'}" in printed.output


def test_the_cpu_backend_command_keeps_openrlhf_cli_and_adds_its_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "cpu")
    monkeypatch.setenv("PYTHONPATH", "/my/own/code")
    command = dry_run(["deepswe_grpopp"], tmp_path)
    env = env_of(command)
    assert env[BACKEND_ENV] == "cpu" and env["DS_ACCELERATOR"] == "cpu"
    shims = os.pathsep.join(str(folder) for folder in SHIM_PATHS.values())
    assert env["PYTHONPATH"] == f"{shims}{os.pathsep}/my/own/code", "the user's PYTHONPATH is extended, not replaced"
    assert env["AGENTRL_OPENRLHF_ROLLOUT"] == "hf", "TinyAgent's laptop profile: the stand-in, its vLLM shim first"
    assert json.loads(env["RAY_OVERRIDE_RESOURCES"]) == {"CPU": 8, "GPU": 2}, "one trainer rank and one engine"
    args = parse_openrlhf_cli(flags_of(command), monkeypatch)
    assert not args.train.colocate_all and not args.vllm.enable_sleep and args.vllm.sync_backend == "gloo"
    assert args.vllm.enforce_eager and args.vllm.enable_prefix_caching, "no graph compile; turns share a prefix"
    assert args.ds.attn_implementation == "sdpa" and not args.ds.packing_samples
    assert (args.actor.num_gpus_per_node, args.vllm.num_engines) == (1, 1)
    assert args.train.micro_batch_size == load_recipe("deepswe_grpopp", profile="laptop").rollout.group_size


def test_describe_marks_what_is_native_patched_and_injected():
    config = OpenRLHFAdapter().describe(load_recipe("deepswe_grpopp"))
    status = {m.key: m.status for m in config.mappings}
    assert {key: status[key] for key in DEEPSWE_STATUS} == DEEPSWE_STATUS
    aggregation = next(m for m in config.mappings if m.key == "loss.aggregation")
    assert aggregation.setting == "PolicyLoss.forward" and "global_batch_size" in aggregation.note
    assert "actor.loss_agg_mode" not in config.native and config.native["algo.advantage.estimator"] == "rloo"
    shown = CliRunner().invoke(build_app(), ["recipes", "show", "deepswe_grpopp", "--framework", "openrlhf"])
    assert shown.exit_code == 0 and "openrlhf.cli.train_ppo_ray" in shown.output and "patched" in shown.output


def test_a_run_writes_its_folder_and_launches_the_command(tmp_path, monkeypatch):
    launched = []

    def finished(command, check):
        """What train_ppo_ray leaves when it succeeds (its recorder writes the report), for a faked launch."""
        launched.append(command)
        (tmp_path / "run" / "report.md").write_text("report")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", finished)
    model = tmp_path / "model"
    model.mkdir()
    recipe = load_recipe("deepswe_grpopp", {"train.steps": 3, "rollout.tasks_per_step": 2}, "laptop")
    folder = OpenRLHFAdapter().run(recipe, RunOptions(run_dir=tmp_path / "run", model=str(model)))
    (command,) = launched
    assert folder == tmp_path / "run" and command[command.index("--actor.model_name_or_path") + 1] == str(model)
    assert load_recipe(str(folder / "recipe.toml")) == recipe
    rows = [json.loads(line) for line in (folder / "prompts.jsonl").read_text().splitlines()]
    held_out = [json.loads(line) for line in (folder / "eval_prompts.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["label"] for r in held_out} == {"days_left", "head", "is_sorted", "to_fahrenheit",
                                                                  "percent", "middle"}
    recorded = json.loads((folder / "run.json").read_text())["command"]
    assert command == fate_shared(recorded), "the recorded command runs under the reaper (kill -9 leaves nothing)"


def test_a_resume_runs_the_recorded_command_from_its_checkpoint_or_says_why_not(tmp_path, monkeypatch):
    launched = []

    def finished(command, check):
        launched.append(command)
        (tmp_path / "run" / "report.md").write_text("report")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", finished)
    (tmp_path / "model").mkdir()
    recipe = load_recipe("deepswe_grpopp", {"train.steps": 3, "train.eval_every": 2}, "laptop")
    folder = OpenRLHFAdapter().run(recipe, RunOptions(run_dir=tmp_path / "run", model=str(tmp_path / "model")))
    recorded = json.loads((folder / "run.json").read_text())["command"]
    assert recorded[recorded.index("--ckpt.save_steps") + 1] == "2", "a checkpoint every train.eval_every steps"
    with pytest.raises(AgentRLError, match=r"no checkpoint to resume from .*_actor/latest is missing"):
        OpenRLHFAdapter().run(recipe, RunOptions(resume=folder))
    (folder / "checkpoints" / "_actor").mkdir(parents=True)
    (folder / "checkpoints" / "_actor" / "latest").write_text("global_step2")
    with pytest.raises(AgentRLError, match=r"its model, ranks, nodes and loggers\); leave out --ranks, --report-to"):
        OpenRLHFAdapter().run(recipe, RunOptions(resume=folder, ranks=2, report_to=("tensorboard",)))
    OpenRLHFAdapter().run(recipe, RunOptions(resume=folder))
    assert launched[-1] == fate_shared([*recorded, "--ckpt.load_enable"])


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(AgentRLError, match="not a local model folder"):
        OpenRLHFAdapter().run(load_recipe("grpo"), RunOptions(run_dir=tmp_path / "run", model=str(tmp_path / "no")))


def test_tinyagent_comes_from_the_warm_start_cache_or_a_clear_error(tmp_path, monkeypatch, tokenizer):
    from agentrl_tinyagent.cache import model_path

    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(AgentRLError, match=r"warm start is not in the cache .*built with TRL.*--model DIR"):
        OpenRLHFAdapter().run(load_recipe("deepswe_grpopp"), RunOptions(run_dir=tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    build_model(tokenizer, seed=0).save_pretrained(model_path(0))
    launched = []

    def finished(command, check):
        """What train_ppo_ray leaves when it succeeds (its recorder writes the report), for a faked launch."""
        launched.append(command)
        (tmp_path / "run" / "report.md").write_text("report")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", finished)
    OpenRLHFAdapter().run(load_recipe("deepswe_grpopp", profile="laptop"), RunOptions(run_dir=tmp_path / "run"))
    assert launched[0][launched[0].index("--actor.model_name_or_path") + 1] == str(model_path(0))


def test_ranks_over_nodes_reach_openrlhf_and_a_running_cluster_keeps_its_resources(tmp_path, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "cpu")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = dry_run(["deepswe_grpopp", "--ranks", "2"], tmp_path / "a")
    assert json.loads(env_of(local)["RAY_OVERRIDE_RESOURCES"]) == {"CPU": 8, "GPU": 3}, "two ranks and one engine"
    assert env_of(local)["RAY_enable_worker_prestart"] == "0", "the local cluster starts no idle workers"
    monkeypatch.setenv("RAY_enable_worker_prestart", "1")
    assert "RAY_enable_worker_prestart" not in env_of(dry_run(["deepswe_grpopp"], tmp_path / "c")), "yours wins"
    args = parse_openrlhf_cli(flags_of(local), monkeypatch)
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node, args.vllm.num_engines) == (1, 2, 1)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    joined = printed(["deepswe_grpopp", "--ranks", "4", "--nodes", "2"], tmp_path / "b")
    assert "--ranks 4 --nodes 2" in joined[0], "the prepare step reproduces the layout"
    command = shlex.split(joined[-1])
    assert not {"RAY_OVERRIDE_RESOURCES", "RAY_prestart_worker_first_driver"} & set(env_of(command))
    args = parse_openrlhf_cli(flags_of(command), monkeypatch)
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node) == (2, 2)


def test_a_command_prepared_for_a_running_cluster_and_run_without_one_gets_the_local_clusters_settings(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(BACKEND_ENV, "cpu")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    prepared = dry_run(["deepswe_grpopp", "--ranks", "2"], tmp_path)
    assert not {RESOURCES_ENV, *LEAN_LOCAL_RAY_ENV} & set(env_of(prepared)), "prepared for the running cluster"
    monkeypatch.delenv("RAY_ADDRESS")
    for name in (RESOURCES_ENV, *LEAN_LOCAL_RAY_ENV):  # unset now and again after the test: fit_cluster sets them
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(sys, "argv", ["train_ppo_ray.py", *flags_of(prepared)])
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", SimpleNamespace(name=CLI_MODULE))
    fit_cluster()
    assert json.loads(os.environ[RESOURCES_ENV]) == {"CPU": 8, "GPU": 3}, "two ranks and one engine, as it runs"
    assert {name: os.environ[name] for name in LEAN_LOCAL_RAY_ENV} == LEAN_LOCAL_RAY_ENV
    assert "no RAY_ADDRESS: OpenRLHF starts its own Ray cluster, with 3 GPU slot(s)" in capsys.readouterr().err


def test_the_runtime_env_hook_carries_the_cpu_backends_variables_to_a_running_clusters_workers(monkeypatch):
    from agentrl_openrlhf.cpu.launch import WORKER_ENV
    from agentrl_openrlhf.ray_hook import runtime_env_hook

    monkeypatch.setattr("agentrl_openrlhf.ray_hook.install_driver", lambda: [])
    for name, value in {BACKEND_ENV: "cpu", **WORKER_ENV}.items():
        monkeypatch.setenv(name, value)
    env_vars = runtime_env_hook({"env_vars": {"NCCL_DEBUG": "WARN"}})["env_vars"]
    assert env_vars == {"NCCL_DEBUG": "WARN", BACKEND_ENV: "cpu", **WORKER_ENV}
    monkeypatch.setenv(BACKEND_ENV, "gpu")
    assert "DS_ACCELERATOR" not in runtime_env_hook({})["env_vars"], "a GPU run's workers keep their own"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert runtime_env_hook({})["env_vars"]["WANDB_MODE"] == "offline", "the trainer actor logs as the launch asked"
