"""``agentrl openrlhf``: where the shipped files are, and the prompt dataset for a recipe."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from agentrl_plugins.cli import OverrideOption
from agentrl_plugins.environment import build_environment, close_environment
from agentrl_plugins.recipe import load_named_recipe

from agentrl_openrlhf.config import RUNTIME_ENV_HOOK
from agentrl_openrlhf.dataset import dataset_rows, write_jsonl
from agentrl_openrlhf.recipe_env import RECIPE_ENV
from agentrl_openrlhf.shipped import AGENT_EXECUTOR, REWARD_FUNC

openrlhf_app = typer.Typer(help="OpenRLHF 0.11.2: the shipped agent and reward files, prompt datasets.",
                           no_args_is_help=True)


def installed_paths() -> dict[str, str]:
    """What an OpenRLHF command line needs from this package."""
    return {
        "train.agent_func_path": str(AGENT_EXECUTOR),
        "reward.remote_url": str(REWARD_FUNC),
        "RAY_RUNTIME_ENV_HOOK": RUNTIME_ENV_HOOK,
        "recipe_env": RECIPE_ENV,
    }


@openrlhf_app.command("paths")
def paths(as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")) -> None:
    """The installed agent-executor and reward files, and the runtime-env hook to set."""
    found = installed_paths()
    if as_json:
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
        return
    for name, value in found.items():
        sys.stdout.write(f"{name}\t{value}\n")


@openrlhf_app.command("prepare")
def prepare(recipe_name: str = typer.Argument(..., metavar="RECIPE", help="A recipe name or TOML file."),
            run_dir: Path = typer.Option(..., "--run-dir", help="The run folder to write."),
            overrides: Optional[list[str]] = OverrideOption,
            profile: Optional[str] = typer.Option(None, help="A recipe profile; laptop for TinyAgent by default."),
            model: Optional[str] = typer.Option(None, help="A local Hugging Face causal LM instead of TinyAgent."),
            report_to: str = typer.Option("none", "--report-to", help="Experiment loggers: tensorboard."),
            ranks: Optional[int] = typer.Option(None, help="Data-parallel trainer ranks; default one."),
            nodes: int = typer.Option(1, help="Ray nodes the ranks spread over; more than one joins the cluster "
                                              "at RAY_ADDRESS.")) -> None:
    """Write the run folder (recipe, prompt datasets, train_ppo_ray.sh) and print the train_ppo_ray command.

    Run the printed command, or ``sh RUN_DIR/train_ppo_ray.sh [YOUR FLAGS...]``.
    """
    from agentrl_plugins.adapter import RunOptions
    from agentrl_plugins.loggers import parse_loggers

    from agentrl_openrlhf.launcher import check_loggers
    from agentrl_openrlhf.launcher import plan as plan_run
    from agentrl_openrlhf.launcher import prepare as prepare_run

    loggers = parse_loggers(report_to)
    check_loggers(loggers)
    recipe = load_named_recipe(recipe_name, overrides, profile, model)
    run, paths, command = plan_run(recipe, RunOptions(run_dir=run_dir, model=model, report_to=loggers, ranks=ranks,
                                                      nodes=nodes), prepare_model=True)
    prepare_run(recipe, run, paths, command)
    sys.stdout.write(shlex.join(command) + "\n")


@openrlhf_app.command("dataset")
def dataset(
    out: Path = typer.Argument(..., help="The JSON-lines file to write."),
    recipe_name: str = typer.Option("deepswe_grpopp", "--recipe", help="Recipe (environment, steps, batch)."),
    split: Optional[str] = typer.Option(None, help="Task split; default the recipe's training split."),
    overrides: Optional[list[str]] = OverrideOption,
    profile: Optional[str] = typer.Option(None, help="A recipe profile; laptop by default."),
) -> None:
    """Write the prompt dataset of the recipe's environment, with its options: --data.prompt_dataset OUT
    --data.input_key prompt --data.label_key label."""

    recipe = load_named_recipe(recipe_name, overrides, profile, None)
    env = build_environment(recipe.environment)
    try:
        rows = dataset_rows(env, recipe, split or recipe.environment.train_split)
    finally:
        close_environment(env)
    write_jsonl(rows, out)
    sys.stdout.write(f"{len(rows)} prompts -> {out}\n")
