"""``agentrl run RECIPE --framework verl``: prepare the run folder, then run verl's own ``main_ppo`` command.

The same two steps a user runs by hand (``--dry-run`` prints them): ``agentrl verl prepare`` writes the run
folder (recipe, dataset, model) and prints the command; the command runs verl's unmodified trainer, whose
recording ``sync`` trainer (:mod:`agentrl_verl.verl_plugin.trainer`) fills the run folder step by step.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from agentrl_plugins.adapter import LEAN_LOCAL_RAY_ENV, RunOptions, lean_local_ray_env, ray_address
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.models import prepare_teacher, run_model
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.reaper import fate_shared
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.vllm_cpu import KV_CACHE_ENV, kv_cache_env

from agentrl_verl import cpu
from agentrl_verl.config import LaunchPaths, check_engine, command, hydra_overrides, run_paths
from agentrl_verl.cpu.overrides import cpu_overrides
from agentrl_verl.dataset import write_dataset
from agentrl_verl.final_weights import latest_checkpoint_step
from agentrl_verl.registration import check_registration

FRAMEWORK = "verl"
SCRIPT = "main_ppo.sh"
RUNTIME_ENV_VARS = "+ray_kwargs.ray_init.runtime_env.env_vars"
SCRIPT_NOTE = ("verl's own trainer for the run in this folder, written by `agentrl verl prepare`. Words after "
               "the script's name are more Hydra overrides (yours win where the recipe leaves a setting open; "
               "one that contradicts the recipe stops the run before it starts).")


def on_cpu(options: RunOptions) -> bool:
    """Whether to run on verl's ``cpu`` platform: asked for (``options.extra["cpu"]`` or ``VERL_PLATFORM=cpu``),
    or no CUDA GPU here."""
    return bool(options.extra.get("cpu")) or cpu.requested() or not torch.cuda.is_available()


@dataclass(frozen=True)
class Launch:
    """One launch: its paths, environment variables and ``main_ppo`` command."""

    paths: LaunchPaths
    env: dict[str, str]
    command: list[str]

    @property
    def run(self) -> RunDir:
        assert self.paths.run_dir is not None
        return RunDir(self.paths.run_dir)

    def shell(self) -> str:
        """The command as one shell line, its environment variables first."""
        return shlex.join([f"{key}={value}" for key, value in self.env.items()] + self.command)

    @property
    def script(self) -> Path:
        """``main_ppo.sh`` in the run folder: the command, with any words after it as more overrides."""
        return self.run.path / SCRIPT

    def write_script(self) -> Path:
        words = ["exec", "env", *[f"{key}={value}" for key, value in self.env.items()], *self.command]
        self.script.write_text(f"#!/bin/sh\n# {SCRIPT_NOTE}\n{shlex.join(words)} \"$@\"\n")
        return self.script


def launch_paths(recipe: Recipe, options: RunOptions, prepare: bool = False) -> LaunchPaths:
    """The dataset and model paths, the run folder and the trainer ranks of this launch (``--ranks`` over
    ``--nodes``; by default every GPU of one node, or one rank on a CPU); a resumed run keeps its model and ranks
    (verl's checkpoint has one shard per rank).

    Computed once per launch: the default run folder is stamped with the clock, so a second call a second
    later would name another folder. ``prepare`` builds a registered model (and teacher) that is not there yet.
    """
    run_dir = Path(options.resume or options.run_dir or RunDir.default(recipe, FRAMEWORK).path).resolve()
    started = RunDir(run_dir).run_info() if options.resume else {}
    model = started.get("model_path") or run_model(recipe, options.model, prepare=prepare)
    if prepare:  # the agent loop workers load the teacher: build a registered one here, once
        prepare_teacher(recipe)
    if started.get("ranks"):
        if options.ranks not in (None, started["ranks"]):
            raise AgentRLError(f"{run_dir} was trained on {started['ranks']} ranks, and verl's checkpoint holds one "
                               f"shard per rank: resume it without --ranks (or with --ranks {started['ranks']})")
        options = dataclasses.replace(options, ranks=started["ranks"], nodes=started.get("nodes", 1))
    per_node = options.ranks_per_node(1 if on_cpu(options) else max(torch.cuda.device_count(), 1))
    return run_paths(recipe, run_dir, str(model), per_node, options.report_to, options.nodes)


def plan(recipe: Recipe, options: RunOptions, prepare: bool = False) -> Launch:
    """The launch for ``options``; a resumed run continues from its folder's latest checkpoint.

    The launch's environment variables also travel in Ray's runtime env: the processes of a running cluster
    (``RAY_ADDRESS``) do not inherit the launching shell's.
    """
    paths = launch_paths(recipe, options, prepare)
    overrides = hydra_overrides(recipe, paths)
    env = {}
    check_engine(recipe, on_cpu(options))
    if on_cpu(options):
        rollout = cpu.rollout_name(recipe.rollout.engine)
        overrides.update(cpu_overrides(recipe.train.seed, paths.ranks, ray_address() is not None, rollout))
        env[cpu.PLATFORM_ENV] = cpu.PLATFORM
        env.update(lean_local_ray_env())
        if rollout == "vllm":
            env.update(kv_cache_env())
    if options.resume is not None:
        overrides["trainer.resume_mode"] = "auto"
    assert paths.run_dir is not None
    overrides["hydra.run.dir"] = str(paths.run_dir / "hydra")
    if "tensorboard" in paths.loggers:
        env["TENSORBOARD_DIR"] = str(paths.run_dir / "tensorboard")
    if "wandb" in paths.loggers:
        env["WANDB_DIR"] = str(paths.run_dir)
    overrides.update({f"{RUNTIME_ENV_VARS}.{key}": value for key, value in env.items()
                      if key not in LEAN_LOCAL_RAY_ENV})  # those are the local cluster's own, not its workers'
    return Launch(paths, env, command(overrides))


def prepare(recipe: Recipe, options: RunOptions) -> Launch:
    """Write the run folder (recipe, ``run.json`` with the prepared command, the dataset under ``data/``,
    ``main_ppo.sh``) and build the model; returns the launch that trains in it."""
    launch = plan(recipe, options, prepare=True)
    if options.resume is None:
        launch.run.create(recipe, FRAMEWORK, {"model": options.model or recipe.train.model,
                                              "model_path": launch.paths.model,
                                              "ranks": launch.paths.ranks,
                                              "nodes": launch.paths.nodes,
                                              "command": launch.command})
        write_dataset(launch.paths.data_dir, recipe.environment)
        launch.write_script()
    return launch


def print_plan(recipe: Recipe, options: RunOptions) -> None:
    """``--dry-run``: the run as the two commands of a hand-run job, in order."""
    launch = plan(recipe, options)
    rollout = "vLLM rollout on vLLM's CPU build" if KV_CACHE_ENV in launch.env else "agentrl_hf rollout"
    variant = f"CPU: verl's cpu platform and {rollout}" if cpu.PLATFORM_ENV in launch.env else "GPU: vLLM rollout"
    if options.resume is None:
        cpu_flag = ["--cpu"] if options.extra.get("cpu") else []
        print(f"# 1. the run folder: recipe, dataset and model\n"
              f"{options.prepare_command(FRAMEWORK, launch.run.path, *cpu_flag)}")
    print(f"# 2. verl's own trainer ({variant})\n{launch.shell()}")


def check_setup(on_cpu: bool) -> None:
    """Raise a :class:`~agentrl_verl.registration.RegistrationError` unless ``import verl`` registers
    agentrl's names and, ``on_cpu``, every CPU workaround fits this verl (in verl's own processes a failure only
    warns)."""
    if on_cpu:
        cpu.activate()
    check_registration()


def launch(recipe: Recipe, options: RunOptions) -> Path | None:
    """Print the commands (``--dry-run``) or run them; returns the run folder.

    The check that verl has agentrl's names (which imports verl, several seconds) runs beside verl's start-up
    instead of before it: a failure stops ``main_ppo`` before its first step and is raised."""
    if options.dry_run:
        check_registration()
        print_plan(recipe, options)
        return None
    if options.resume is not None:
        latest_checkpoint_step(RunDir(options.resume).checkpoints)
    started = prepare(recipe, options)
    with ThreadPoolExecutor(1) as pool:
        checked = pool.submit(check_setup, cpu.PLATFORM_ENV in started.env)
        trainer = subprocess.Popen(fate_shared([sys.executable, *started.command[1:]]),
                                   env={**os.environ, **started.env})
        try:
            checked.result()
        except BaseException:
            trainer.terminate()
            trainer.wait()
            raise
        returncode = trainer.wait()
    if returncode != 0:
        raise AgentRLError(f"verl's main_ppo exited with status {returncode}; run folder {started.run.path}")
    if not started.run.report_file.is_file():
        raise AgentRLError(f"verl's main_ppo finished without agentrl's report in {started.run.path}: was "
                           f"{cpu.PLATFORM_ENV} or trainer.v1.trainer_mode changed?")
    return started.run.path
