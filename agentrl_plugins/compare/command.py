"""``agentrl compare RECIPE... --frameworks trl,verl,openrlhf [--parity | --learning]`` and ``agentrl experiment
NAME``."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from pathlib import Path
from typing import Optional

import typer

from agentrl_plugins.compare.batch import write_input
from agentrl_plugins.compare.experiments import append_section, experiment, experiment_section
from agentrl_plugins.compare.learning import check_budgets, plan_arms, recipe_label, run_learning
from agentrl_plugins.compare.learning_report import arms_table, write_learning_report
from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.report import ParityRun, write_report
from agentrl_plugins.compare.runner import check_frameworks, find_env, run_side
from agentrl_plugins.compare.table import differences_markdown, markdown, parity_table
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe, parse_overrides
from agentrl_plugins.recipe_schema import Recipe


def run_parity(recipe: Recipe, overrides: dict, frameworks: list[str], seed: int, folder: Path,
               ranks: int = 1) -> ParityRun:
    """Record the batch, run every framework's side in its environment (its trainer split over ``ranks``
    data-parallel ranks), and build the table."""
    if ranks < 1:
        raise AgentRLError(f"--ranks takes a positive number of data-parallel trainer ranks (got {ranks})")
    envs = [find_env(name) for name in check_frameworks(frameworks)]
    folder.mkdir(parents=True, exist_ok=True)
    print(f"parity: recording the batch (seed {seed}, {ranks} trainer rank(s))", file=sys.stderr, flush=True)
    batch = dataclasses.replace(record_batch(recipe, seed), ranks=ranks)
    input_path = write_input(folder / "parity_input.json", recipe, batch)
    results = [run_side(env, input_path, folder / f"parity_{env.framework}.json") for env in envs]
    return ParityRun(recipe, overrides, batch, envs, results, parity_table(recipe, batch, results))


def default_folder(recipes: list[str], override_items: list[str]) -> Path:
    """``runs/compare-A[-vs-B]``, plus a short hash of the overrides so that differently overridden comparisons
    never share a folder."""
    name = "compare-" + "-vs-".join(map(recipe_label, recipes))
    if override_items:
        name += "-" + hashlib.sha256("\n".join(override_items).encode()).hexdigest()[:8]
    return Path("runs") / name


def compare_command(
    recipe_names: list[str] = typer.Argument(..., metavar="RECIPE..."),
    frameworks: str = typer.Option("trl,verl,openrlhf", "--frameworks", "--framework",
                                   help="Comma-separated frameworks."),
    parity: bool = typer.Option(False, "--parity", help="Only the parity check: one recorded batch through each "
                                                       "framework's own code."),
    learning: bool = typer.Option(False, "--learning", help="Only the learning comparison: every recipe on every "
                                                           "framework's real trainer, per seed."),
    seeds: str = typer.Option("0,1,2", help="Comma-separated training seeds of the learning comparison."),
    model: Optional[str] = typer.Option(None, help="A local Hugging Face causal LM instead of TinyAgent (learning)."),
    overrides: Optional[list[str]] = typer.Option(None, "-o", "--override", help="Override a recipe key."),
    profile: Optional[str] = typer.Option(None, help="Apply one of the recipe's profiles (parity)."),
    seed: Optional[int] = typer.Option(None, help="Seed of the recorded batch (default: the recipe's train.seed)."),
    ranks: int = typer.Option(1, help="Data-parallel trainer ranks each framework splits the parity batch over "
                                      "(verl, OpenRLHF); every group spans every rank."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default runs/compare-RECIPE[-vs-RECIPE][-HASH])."),
) -> None:
    """Compare frameworks on a recipe, or recipes on a framework: parity to 1e-6, then learning over seeds.

    With one recipe and neither flag, both run; with two or more recipes, the learning comparison runs."""
    names = [name.strip() for name in frameworks.split(",") if name.strip()]
    check_frameworks(names)
    items = list(overrides or [])
    if parity and len(recipe_names) > 1:
        raise AgentRLError("--parity compares frameworks on one recipe; name one recipe")
    folder = out or default_folder(recipe_names, items)
    table = None
    if parity or not learning and len(recipe_names) == 1:
        values = parse_overrides(items)
        recipe = load_recipe(recipe_names[0], values, profile)
        batch_seed = recipe.train.seed if seed is None else seed
        run = run_parity(recipe, values, names, batch_seed, folder, ranks)
        table = run.table
        report = write_report(run, folder)
        sys.stdout.write(f"{markdown(run.table)}\n\nparity report: {report}\n")
    if learning or not parity:
        arms = plan_arms(recipe_names, names)
        results = run_learning(arms, parsed_seeds(seeds), items, folder, model)
        design = differences_markdown(table) if table is not None and table.differences else ""
        report = write_learning_report(results, check_budgets(arms, items, model), items, folder, design)
        sys.stdout.write(f"{arms_table(results)}\n\nlearning report: {report}\n")
    if table is not None and table.mismatches:
        sys.stdout.write(f"{len(table.mismatches)} parity row(s) beyond the tolerance: see the report\n")
        raise typer.Exit(1)


def parsed_seeds(seeds: str) -> list[int]:
    try:
        return [int(part) for part in seeds.split(",") if part.strip()]
    except ValueError:
        raise AgentRLError(f"--seeds takes comma-separated integers, e.g. --seeds 0,1,2 (got {seeds!r})") from None


def experiment_command(
    name: str = typer.Argument(..., metavar="NAME", help="A registered experiment, such as credit or objectives "
                               "(`agentrl plugins` lists them, kind experiment)."),
    framework: str = typer.Option("trl", "--framework", help="The framework every arm trains with."),
    seeds: str = typer.Option("0,1,2,3,4", help="Comma-separated training seeds."),
    model: Optional[str] = typer.Option(None, help="A local Hugging Face causal LM instead of TinyAgent."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default runs/experiment-NAME-FRAMEWORK)."),
) -> None:
    """Run one of the book's experiments: its recipes over the seeds, the learning report, and a verdict on each
    of the book's predictions (held, contradicted, or not resolved within the seed spread)."""
    chosen = experiment(name)
    arms = plan_arms(list(chosen.recipes), [framework])
    folder = out or Path("runs") / f"experiment-{name}-{framework}"
    items = list(chosen.overrides)
    results = run_learning(arms, parsed_seeds(seeds), items, folder, model)
    report = write_learning_report(results, check_budgets(arms, items, model), items, folder)
    section = experiment_section(chosen, results)
    append_section(report, section)
    sys.stdout.write(f"{arms_table(results)}\n\n{section}\n\nexperiment report: {report}\n")
