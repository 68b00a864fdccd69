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
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.config import LaunchPaths, command, default_paths, hydra_overrides
from agentrl_verl.dataset import write_dataset

FRAMEWORK = "verl"


def launch_paths(recipe: Recipe, options: RunOptions) -> LaunchPaths:
    """The dataset and model paths, the run folder and the GPU count of this launch."""
    defaults = default_paths(recipe)
    run_dir = Path(options.resume or options.run_dir or RunDir.default(recipe, FRAMEWORK).path).resolve()
    model = str(Path(options.model).resolve()) if options.model else defaults.model
    return LaunchPaths(model, defaults.data_dir, run_dir, max(torch.cuda.device_count(), 1))


def launch_command(recipe: Recipe, options: RunOptions) -> list[str]:
    """The full ``main_ppo`` command; a resumed run continues from its folder's latest checkpoint."""
    overrides = hydra_overrides(recipe, launch_paths(recipe, options))
    if options.resume is not None:
        overrides["trainer.resume_mode"] = "auto"
    return command(overrides)


def save_tinyagent(path: Path, seed: int) -> None:
    """A freshly initialised TinyAgent and its tokenizer as a local Hugging Face folder (not warm-started)."""
    from agentrl_plugins.tinyagent.model import build_model
    from agentrl_plugins.tinyagent.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    build_model(tokenizer, seed).save_pretrained(path)
    tokenizer.save_pretrained(path)


def launch(recipe: Recipe, options: RunOptions) -> Path | None:
    """Print the command (``--dry-run``) or run it in a subprocess; returns the run folder."""
    cmd = launch_command(recipe, options)
    if options.dry_run:
        print(shlex.join(cmd))
        return None
    paths = launch_paths(recipe, options)
    run = RunDir(paths.run_dir)
    if options.resume is None:
        run.create(recipe, FRAMEWORK, {"model": options.model or recipe.train.model, "model_path": paths.model})
    write_dataset(paths.data_dir, recipe.environment.name)
    if options.model is None and recipe.train.model == "tinyagent" and not Path(paths.model).is_dir():
        save_tinyagent(Path(paths.model), recipe.train.seed)
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(run.path / "verl_metrics.jsonl")}
    result = subprocess.run([sys.executable, *cmd[1:]], env=env, check=False)
    if result.returncode != 0:
        raise AgentRLError(f"verl's main_ppo exited with status {result.returncode}; run folder {run.path}")
    return run.path
