"""``agentrl gym``: list the families and run scripted-policy baselines."""

from __future__ import annotations

import json
import sys

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from bugfix_gym.env import BugFixGym
from bugfix_gym.simulate import baseline

gym_app = typer.Typer(help="The BugFix gym: families, splits, edit ops and scripted baselines.", no_args_is_help=True)
console = Console()


@gym_app.command("list")
def list_families(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every family with its bug kind, split and edit ops."""
    gym = BugFixGym()
    rows = [{"family": f.name, "bug_kind": f.bug_kind, "split": f.split, "function": f.function,
             "ops": {op.name: op.kind for op in f.ops}} for f in gym.families.values()]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table(title="BugFix gym families")
    for column in ("family", "bug kind", "split", "edit ops (kind)"):
        table.add_column(column)
    for row in rows:
        ops = ", ".join(f"{name} ({kind})" for name, kind in row["ops"].items())
        table.add_row(row["family"], row["bug_kind"], row["split"], escape(ops))
    console.print(table)


@gym_app.command("simulate")
def simulate(
    task: str = typer.Option("all", help="A family name, or 'all'."),
    policy: str = typer.Option("random", help="random, solver, fixer or hacker."),
    episodes: int = typer.Option(2000, min=1),
    seed: int = typer.Option(0),
    max_turns: int = typer.Option(6, min=1),
    group_size: int = typer.Option(8, min=2, help="G in the informative-group fraction 1 - p^G - (1-p)^G."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run a scripted policy and print success rate, hacked fraction and informative groups."""
    gym = BugFixGym()
    try:
        families = list(gym.families.values()) if task == "all" else [gym.family(task)]
        with Progress(console=Console(stderr=True), transient=True) as progress:
            bar = progress.add_task("episodes", total=episodes * len(families))
            results = [baseline(gym, family, policy, episodes, seed, max_turns,
                                lambda: progress.advance(bar)) for family in families]
    finally:
        gym.close()
    overall_success = sum(r.success_rate for r in results) / len(results)
    overall_hacked = sum(r.hacked_fraction for r in results) / len(results)
    if as_json:
        sys.stdout.write(json.dumps({
            "policy": policy, "episodes": episodes, "seed": seed, "group_size": group_size,
            "success_rate": overall_success, "hacked_fraction": overall_hacked,
            "families": [{**r.__dict__, "informative_fraction": r.informative_fraction(group_size)} for r in results],
        }, indent=2) + "\n")
        return
    console.print(f"success rate (hidden reward = 1): {overall_success:.3f}")
    console.print(f"hacked (submitted, public pass, hidden fail): {overall_hacked:.3f}")
    table = Table(title=f"{policy} policy, {episodes} episodes per family, seed {seed}")
    for column in ("family", "split", "pass rate", "hacked", f"informative (G={group_size})"):
        table.add_column(column)
    for r in results:
        table.add_row(r.family, r.split, f"{r.success_rate:.3f}", f"{r.hacked_fraction:.3f}",
                      f"{r.informative_fraction(group_size):.3f}")
    console.print(table)
