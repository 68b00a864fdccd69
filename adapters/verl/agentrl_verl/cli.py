"""``agentrl verl``: the dataset verl's trainer reads."""

from __future__ import annotations

from pathlib import Path

import typer

verl_app = typer.Typer(help="verl: the parquet dataset for the agentrl agent loops.", no_args_is_help=True)


@verl_app.command("dataset")
def dataset(out_dir: Path = typer.Argument(..., help="Folder for one <split>.parquet per split."),
            environment: str = typer.Option("bugfix", help="A registered agentrl environment.")) -> None:
    """Write the environment's tasks as verl parquet files, one per split, with the agent loop named per row."""
    from agentrl_plugins.recipe_schema import EnvironmentSection

    from agentrl_verl.dataset import write_dataset

    for split, path in write_dataset(out_dir, EnvironmentSection(name=environment)).items():
        typer.echo(f"{split}: {path}")
