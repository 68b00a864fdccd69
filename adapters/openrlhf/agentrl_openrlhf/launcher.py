"""``agentrl run RECIPE --framework openrlhf``: a run folder with the recipe and datasets, then ``train_ppo_ray``.

OpenRLHF's own command line is launched unmodified; the recipe and the run folder reach its
processes through ``AGENTRL_OPENRLHF_RECIPE`` / ``AGENTRL_OPENRLHF_RUN_DIR`` and the runtime-env
hook, whose recorder writes ``metrics.jsonl`` as the run goes and the report when it ends.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from agentrl_plugins import loggers
from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.environment import build_environment, close_environment
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.models import prepare_teacher, run_model
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.reaper import fate_shared
from agentrl_plugins.runs.rundir import RunDir

from agentrl_openrlhf.config import RunPaths, describe, engine_notice
from agentrl_openrlhf.cpu import choose_backend
from agentrl_openrlhf.dataset import dataset_rows, write_jsonl

FRAMEWORK = "openrlhf"
SCRIPT = "train_ppo_ray.sh"
RESUME_FLAG = "--ckpt.load_enable"
SCRIPT_NOTE = ("OpenRLHF's own trainer for the run in this folder, written by `agentrl openrlhf prepare`. Words "
               "after the script's name are more flags (argparse keeps the last value of a flag).")


def run_paths(run: RunDir, model: Path, loggers: Sequence[str] = (), nodes: int = 1,
              ranks_per_node: int = 1) -> RunPaths:
    """Absolute paths, since OpenRLHF's Ray workers need not share the launcher's working directory;
    ``loggers`` (``--report-to``) may name tensorboard, whose event files go to the run folder's ``tensorboard/``."""
    root = RunDir(run.path.resolve())
    return RunPaths(folder=root.path, recipe=root.recipe_file, train_data=root.path / "prompts.jsonl",
                    eval_data=root.path / "eval_prompts.jsonl", checkpoints=root.checkpoints,
                    final=root.final_weights, model=model,
                    tensorboard=root.path / "tensorboard" if "tensorboard" in loggers else None,
                    wandb=root.path if "wandb" in loggers else None,
                    nodes=nodes, ranks_per_node=ranks_per_node)


def check_loggers(names: Sequence[str]) -> None:
    """``--report-to`` for OpenRLHF: TensorBoard maps to ``--logger.tensorboard_dir``, W&B to ``--logger.wandb.key``
    (W&B's own credentials, checked by the core); others are refused with what to do instead."""
    for name in names:
        if name not in ("tensorboard", "wandb"):
            raise AgentRLError(f"--report-to {name}: OpenRLHF 0.11.2 has no {name} logger; use --report-to "
                               "tensorboard or wandb")
    loggers.check_loggers(names)


def plan(recipe: Recipe, options: RunOptions, prepare_model: bool = False) -> tuple[RunDir, RunPaths, list[str]]:
    """The run folder, its paths and the ``train_ppo_ray`` command of ``options``; ``prepare_model`` builds a
    registered model (and teacher) that is not there yet."""
    run = RunDir(Path(options.run_dir)) if options.run_dir else RunDir.default(recipe, FRAMEWORK)
    paths = run_paths(run, run_model(recipe, options.model, prepare=prepare_model), options.report_to, options.nodes,
                      options.ranks_per_node())
    if prepare_model:  # the executors load the teacher: build a registered one here, once
        prepare_teacher(recipe)
    backend = choose_backend()
    notice = engine_notice(recipe, backend)
    if notice:
        print(notice, file=sys.stderr, flush=True)
    return run, paths, describe(recipe, paths, backend).command


def prepare(recipe: Recipe, run: RunDir, paths: RunPaths, command: list[str]) -> Path:
    """Write the run folder, the prompt datasets (the recipe's environment with its options) and
    ``train_ppo_ray.sh``; returns the script."""
    run.create(recipe, FRAMEWORK, {"model": str(paths.model), "model_path": str(paths.model), "command": command,
                                   "ranks": paths.ranks, "nodes": paths.nodes})
    env = build_environment(recipe.environment)
    try:
        write_jsonl(dataset_rows(env, recipe, recipe.environment.train_split), paths.train_data)
        write_jsonl(dataset_rows(env, recipe, recipe.environment.eval_split), paths.eval_data)
    finally:
        close_environment(env)
    script = run.path / SCRIPT
    script.write_text(f"#!/bin/sh\n# {SCRIPT_NOTE}\nexec {shlex.join(command)} \"$@\"\n")
    return script


def print_plan(options: RunOptions, run: RunDir, command: list[str]) -> None:
    """``--dry-run``: the run as the two commands of a hand-run job, in order."""
    variant = "CPU backend" if choose_backend() == "cpu" else "GPU: vLLM rollout"
    print(f"# 1. the run folder: recipe and prompt datasets\n{options.prepare_command(FRAMEWORK, run.path)}")
    print(f"# 2. OpenRLHF's own trainer ({variant})\n{shlex.join(command)}")


def launch(recipe: Recipe, run: RunDir, paths: RunPaths, command: list[str]) -> Path:
    """Write the run folder and the datasets, run the command (its recorder writes the report); return the
    folder."""
    prepare(recipe, run, paths, command)
    return train(run, command)


def resume(run: RunDir, dry_run: bool = False) -> Path | None:
    """``agentrl run --resume``: the run's own command again, from its latest checkpoint (OpenRLHF's
    ``--ckpt.load_enable``; the recorder drops the rows after the checkpoint's step)."""
    command = [*run.run_info()["command"], RESUME_FLAG]
    latest = run.checkpoints / "_actor" / "latest"
    if not latest.is_file():
        raise AgentRLError(f"{run.path} has no checkpoint to resume from ({latest} is missing): OpenRLHF saves one "
                           "every train.eval_every steps (--ckpt.save_steps); start the run again instead")
    if dry_run:
        print(shlex.join(command))
        return None
    print(f"resuming {run.path} from OpenRLHF's checkpoint {latest.read_text().strip()}", file=sys.stderr, flush=True)
    return train(run, command)


def train(run: RunDir, command: list[str]) -> Path:
    """Run OpenRLHF's command for the run folder ``run`` (under the reaper); return the folder."""
    result = subprocess.run(fate_shared(command), check=False)
    if result.returncode != 0:
        raise AgentRLError(f"OpenRLHF exited with status {result.returncode}; the run folder is {run.path}")
    if not run.report_file.is_file():
        raise AgentRLError(f"OpenRLHF finished without agentrl's report in {run.path}: did the runtime-env hook "
                           f"(RAY_RUNTIME_ENV_HOOK) reach its processes?")
    print(f"run folder: {run.path}\nreport: {run.report_file}", file=sys.stderr)
    return run.path
