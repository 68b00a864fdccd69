"""``agentrl run RECIPE --framework verl``: write the dataset and model, then run verl's ``main_ppo``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import torch

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.models import run_model
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl import cpu
from agentrl_verl.config import LaunchPaths, command, default_paths, hydra_overrides
from agentrl_verl.cpu.overrides import cpu_overrides
from agentrl_verl.dataset import write_dataset
from agentrl_verl.episodes import LOG_ENV, truncate_episodes
from agentrl_verl.recorder import EPISODES_FILE, VERL_METRICS_FILE, record_run

FRAMEWORK = "verl"


def on_cpu(options: RunOptions) -> bool:
    """Whether to run on verl's ``cpu`` platform: asked for (``options.extra["cpu"]`` or ``VERL_PLATFORM=cpu``),
    or no CUDA GPU here."""
    return bool(options.extra.get("cpu")) or cpu.requested() or not torch.cuda.is_available()


def launch_paths(recipe: Recipe, options: RunOptions, prepare: bool = False) -> LaunchPaths:
    """The dataset and model paths, the run folder and the GPU count of this launch.

    Computed once per launch: the default run folder is stamped with the clock, so a second call a second
    later would name another folder. ``prepare`` builds a registered model that is not there yet.
    """
    run_dir = Path(options.resume or options.run_dir or RunDir.default(recipe, FRAMEWORK).path).resolve()
    started_with = RunDir(run_dir).run_info().get("model_path") if options.resume else None
    model = started_with or run_model(recipe, options.model, prepare=prepare)
    return LaunchPaths(str(model), default_paths(recipe).data_dir, run_dir, max(torch.cuda.device_count(), 1))


def launch_command(recipe: Recipe, options: RunOptions, paths: LaunchPaths) -> list[str]:
    """The full ``main_ppo`` command for ``paths``; a resumed run continues from its folder's latest checkpoint."""
    overrides = hydra_overrides(recipe, paths)
    if on_cpu(options):
        overrides.update(cpu_overrides(recipe.train.seed))
    if options.resume is not None:
        overrides["trainer.resume_mode"] = "auto"
    overrides["hydra.run.dir"] = str(paths.run_dir / "hydra")
    return command(overrides)


def latest_checkpoint_step(run: RunDir) -> int:
    """The step of verl's latest checkpoint in ``run`` (what ``trainer.resume_mode=auto`` resumes from)."""
    marker = run.checkpoints / "latest_checkpointed_iteration.txt"
    if not marker.is_file():
        raise AgentRLError(f"{run.path} has no verl checkpoint yet: start the run again instead of resuming it")
    return int(marker.read_text().strip())


def save_final_weights(run: RunDir) -> Path:
    """The actor of verl's last checkpoint as a plain Hugging Face folder, ``final/`` in the run folder.

    One shard (one trainer process, as on a CPU) is written as it was trained, in float32; several
    shards go through verl's own ``verl.model_merger``, which writes bfloat16.
    """
    actor = run.checkpoints / f"global_step_{latest_checkpoint_step(run)}" / "actor"
    shards = sorted(actor.glob("model_world_size_*_rank_*.pt"))
    if len(shards) != 1:
        merge = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
                 "--target_dir", str(run.final_weights)]
        done = subprocess.run(merge, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise AgentRLError(f"verl's model merger failed on {actor}:\n{done.stderr[-3000:]}")
        return run.final_weights
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    state = torch.load(shards[0], map_location="cpu", weights_only=False)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(actor / "huggingface"), dtype=torch.float32)
    model.load_state_dict({key: getattr(value, "to_local", lambda v=value: v)() for key, value in state.items()})
    model.save_pretrained(run.final_weights)
    AutoTokenizer.from_pretrained(actor / "huggingface").save_pretrained(run.final_weights)
    return run.final_weights


def launch(recipe: Recipe, options: RunOptions) -> Path | None:
    """Print the command (``--dry-run``) or run it in a subprocess; returns the run folder."""
    paths = launch_paths(recipe, options, prepare=not options.dry_run)
    cmd = launch_command(recipe, options, paths)
    env = {cpu.PLATFORM_ENV: cpu.PLATFORM} if on_cpu(options) else {}
    if options.dry_run:
        print(shlex.join([f"{key}={value}" for key, value in env.items()] + cmd))
        return None
    if env:
        cpu.activate()  # here too: verl's plugin loader would only log a VerlChangedError at DEBUG
    run = RunDir(paths.run_dir)
    if options.resume is None:
        run.create(recipe, FRAMEWORK, {"model": options.model or recipe.train.model, "model_path": paths.model})
    else:
        truncate_episodes(run.path / EPISODES_FILE, latest_checkpoint_step(run))
    write_dataset(paths.data_dir, recipe.environment)
    env = {**os.environ, **env, "VERL_FILE_LOGGER_PATH": str(run.path / VERL_METRICS_FILE),
           LOG_ENV: str(run.path / EPISODES_FILE)}
    result = subprocess.run([sys.executable, *cmd[1:]], env=env, check=False)
    if result.returncode != 0:
        raise AgentRLError(f"verl's main_ppo exited with status {result.returncode}; run folder {run.path}")
    save_final_weights(run)
    report = record_run(run)
    print(f"run folder: {run.path}\nreport: {report}", file=sys.stderr)
    return run.path
