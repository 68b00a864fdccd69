"""``agentrl openrlhf``: where the shipped files are, and the prompt dataset for a recipe."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from agentrl_plugins.environment import build_environment
from agentrl_plugins.recipe import load_recipe

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


@openrlhf_app.command("dataset")
def dataset(
    out: Path = typer.Argument(..., help="The JSON-lines file to write."),
    recipe_name: str = typer.Option("deepswe_grpopp", "--recipe", help="Recipe (environment, steps, batch)."),
    split: Optional[str] = typer.Option(None, help="Task split; default the recipe's training split."),
) -> None:
    """Write the prompt dataset: --data.prompt_dataset OUT --data.input_key prompt --data.label_key label."""
    recipe = load_recipe(recipe_name)
    env = build_environment(recipe.environment)
    rows = dataset_rows(env, recipe, split or recipe.environment.train_split)
    write_jsonl(rows, out)
    sys.stdout.write(f"{len(rows)} prompts -> {out}\n")
