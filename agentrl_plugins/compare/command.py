"""``agentrl compare RECIPE --frameworks trl,verl,openrlhf --parity``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from agentrl_plugins.compare.batch import write_input
from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.report import ParityRun, write_report
from agentrl_plugins.compare.runner import check_frameworks, find_env, run_side
from agentrl_plugins.compare.table import markdown, parity_table
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe, parse_overrides
from agentrl_plugins.recipe_schema import Recipe


def run_parity(recipe: Recipe, overrides: dict, frameworks: list[str], seed: int, folder: Path) -> ParityRun:
    """Record the batch, run every framework's side in its environment, and build the table."""
    envs = [find_env(name) for name in check_frameworks(frameworks)]
    folder.mkdir(parents=True, exist_ok=True)
    print(f"parity: recording the batch (seed {seed})", file=sys.stderr, flush=True)
    batch = record_batch(recipe, seed)
    input_path = write_input(folder / "parity_input.json", recipe, batch)
    results = [run_side(env, input_path, folder / f"parity_{env.framework}.json") for env in envs]
    return ParityRun(recipe, overrides, batch, envs, results, parity_table(recipe, batch, results))


def compare_command(
    recipe_name: str = typer.Argument(..., metavar="RECIPE"),
    frameworks: str = typer.Option("trl,verl,openrlhf", "--frameworks", help="Comma-separated frameworks."),
    parity: bool = typer.Option(False, "--parity", help="One recorded batch through each framework's own code."),
    overrides: Optional[List[str]] = typer.Option(None, "-o", "--override", help="Override a recipe key."),
    profile: Optional[str] = typer.Option(None, help="Apply one of the recipe's profiles."),
    seed: Optional[int] = typer.Option(None, help="Seed of the recorded batch (default: the recipe's train.seed)."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default runs/compare-RECIPE-seedN)."),
) -> None:
    """Compare frameworks on one recipe; --parity checks their numbers against the core to 1e-6."""
    if not parity:
        raise AgentRLError("only --parity is available so far: agentrl compare RECIPE --frameworks ... --parity")
    values = parse_overrides(overrides or [])
    recipe = load_recipe(recipe_name, values, profile)
    seed = recipe.train.seed if seed is None else seed
    folder = out or Path("runs") / f"compare-{recipe.name}-seed{seed}"
    run = run_parity(recipe, values, [name.strip() for name in frameworks.split(",") if name.strip()], seed, folder)
    report = write_report(run, folder)
    sys.stdout.write(f"{markdown(run.table)}\n\nreport: {report}\n")
    if run.table.mismatches:
        sys.stdout.write(f"{len(run.table.mismatches)} row(s) beyond the tolerance: see the report\n")
        raise typer.Exit(1)
