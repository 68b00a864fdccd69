"""``agentrl verl``: the run folder and dataset for your own ``python -m verl.trainer.main_ppo`` command."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentrl_plugins.cli import OverrideOption
from agentrl_plugins.recipe import load_named_recipe

verl_app = typer.Typer(help="verl: the run folder, dataset and command for verl's own main_ppo.",
                       no_args_is_help=True)


@verl_app.command("prepare")
def prepare(recipe_name: str = typer.Argument(..., metavar="RECIPE", help="A recipe name or TOML file."),
            run_dir: Path = typer.Option(..., "--run-dir", help="The run folder to write."),
            overrides: Optional[list[str]] = OverrideOption,
            profile: Optional[str] = typer.Option(None, help="A recipe profile; laptop for TinyAgent by default."),
            model: Optional[str] = typer.Option(None, help="A local Hugging Face causal LM instead of TinyAgent."),
            report_to: str = typer.Option("none", "--report-to",
                                          help="Experiment loggers, comma-separated: tensorboard, wandb, trackio."),
            cpu: bool = typer.Option(False, "--cpu", help="verl's cpu platform even where a GPU is."),
            ranks: Optional[int] = typer.Option(None, help="Data-parallel trainer ranks; default every GPU, one on "
                                                           "a CPU."),
            nodes: int = typer.Option(1, help="Ray nodes the ranks spread over; more than one joins the cluster "
                                              "at RAY_ADDRESS.")) -> None:
    """Write the run folder (recipe, dataset, model, main_ppo.sh) and print the main_ppo command that trains in it.

    Run the printed command, or ``bash RUN_DIR/main_ppo.sh [YOUR OVERRIDES...]``.
    """
    from agentrl_plugins.adapter import RunOptions
    from agentrl_plugins.loggers import check_loggers, parse_loggers

    from agentrl_verl.launch import prepare as prepare_run

    loggers = parse_loggers(report_to)
    check_loggers(loggers)
    launch = prepare_run(load_named_recipe(recipe_name, overrides, profile, model),
                         RunOptions(run_dir=run_dir, model=model, report_to=loggers, ranks=ranks, nodes=nodes,
                                    extra={"cpu": cpu}))
    typer.echo(launch.shell())


@verl_app.command("dataset")
def dataset(out_dir: Path = typer.Argument(..., help="Folder for one <split>.parquet per split."),
            recipe_name: str = typer.Option("deepswe_grpopp", "--recipe",
                                            help="The recipe whose environment (with its options) to write."),
            overrides: Optional[list[str]] = OverrideOption,
            profile: Optional[str] = typer.Option(None, help="A recipe profile; laptop by default.")) -> None:
    """Write the recipe's environment's tasks as verl parquet files, one per split, the agent loop named per row."""
    from agentrl_verl.dataset import write_dataset

    recipe = load_named_recipe(recipe_name, overrides, profile, None)
    for split, path in write_dataset(out_dir, recipe.environment).items():
        typer.echo(f"{split}: {path}")
