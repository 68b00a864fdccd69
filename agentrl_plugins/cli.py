"""The ``agentrl`` command: plugins, recipes and runs; plugins add their own subcommands."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.compare.command import compare_command, experiment_command
from agentrl_plugins.components import KINDS
from agentrl_plugins.environment import build_environment, close_environment
from agentrl_plugins.errors import AgentRLError, MissingAdapterError, RecipeError, UnknownNameError
from agentrl_plugins.frameworks import install_hint, known_frameworks, python_of
from agentrl_plugins.gateway.command import gateway_command
from agentrl_plugins.loggers import parse_loggers
from agentrl_plugins.plugins import PluginManager, get_plugin_manager
from agentrl_plugins.recipe import default_profile, load_recipe, parse_overrides, recipe_to_dict
from agentrl_plugins.recipe_schema import SECTIONS, Recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.runs.storage import storage_error

console = Console(width=None if sys.stdout.isatty() else 140)
OverrideOption = typer.Option(None, "-o", "--override", help="Override a recipe key: -o loss.clip_high=0.3")
JsonOption = typer.Option(False, "--json", help="Print JSON for scripts.")


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*[escape(str(cell)) for cell in row])
    return table


def plugins_command(as_json: bool = JsonOption) -> None:
    """List every component and plugin: kind, name, description, distribution, status."""
    rows = plugin_rows(get_plugin_manager())
    if as_json:
        _print_json(rows)
        return
    columns = ["kind", "name", "description", "distribution", "status"]
    console.print(_table("agentrl plugins", columns, [[row[c] for c in columns] for row in rows]))


def plugin_rows(manager: PluginManager) -> list[dict[str, Any]]:
    """One row per registered component; one per plugin that registers none but implements event hooks
    (kind ``hooks``); one per plugin that failed to load."""
    infos = {info.name: info for info in manager.plugin_table()}
    rows = []
    for kind in KINDS:
        for entry in manager.registry(kind):
            rows.append({"kind": kind, "name": entry.record.name, "description": entry.record.description,
                         "distribution": entry.distribution, "plugin": entry.plugin,
                         "status": infos[entry.plugin].status})
    registering = {row["plugin"] for row in rows}
    for info in infos.values():
        if info.status != "ok":
            rows.append({"kind": "plugin", "name": info.name, "description": info.error or info.entry_point,
                         "distribution": info.distribution, "plugin": info.name, "status": info.status})
        elif info.name not in registering:
            hooks = sorted(caller.name for caller in manager.get_hookcallers(manager.get_plugin(info.name)) or [])
            rows.append({"kind": "hooks", "name": info.name, "description": f"implements {', '.join(hooks)}",
                         "distribution": info.distribution, "plugin": info.name, "status": info.status})
    return rows


recipes_app = typer.Typer(help="List and inspect recipes.", no_args_is_help=True)


@recipes_app.command("list")
def recipes_list(as_json: bool = JsonOption) -> None:
    """Every registered recipe with its description and origin."""
    entries = list(get_plugin_manager().registry("recipe"))
    rows = [{"name": e.record.name, "description": e.record.description, "distribution": e.distribution,
             "path": str(e.record.obj)} for e in entries]
    if as_json:
        _print_json(rows)
        return
    console.print(_table("recipes", ["name", "description", "distribution"],
                         [[r["name"], r["description"], r["distribution"]] for r in rows]))


def _adapter(framework: str):
    manager = get_plugin_manager()
    registry = manager.registry("adapter")
    if framework in registry:
        return registry.get(framework).factory()
    broken = next((info for info in manager.plugin_table() if info.name == framework and info.status == "broken"), None)
    if broken:
        raise MissingAdapterError(f"framework {framework!r}: its adapter {broken.distribution} {broken.version} is "
                                  f"installed but did not load: {broken.error.strip().splitlines()[-1]}")
    if framework in known_frameworks():
        env = python_of(framework)
        elsewhere = f"; its environment here is {env.python} (from {env.found_by})" if env else ""
        raise MissingAdapterError(f"framework {framework!r} has no adapter in this environment ({sys.executable}): "
                                  f"{install_hint(framework)}{elsewhere}.")
    raise UnknownNameError("framework", framework, known_frameworks())


def _recipe_rows(recipe: Recipe) -> list[dict[str, Any]]:
    data = recipe_to_dict(recipe)
    return [{"key": f"{section}.{key}", "value": value, "source": recipe.sources.get(f"{section}.{key}", "")}
            for section in SECTIONS for key, value in data[section].items()]


@recipes_app.command("show")
def recipes_show(
    name: str,
    framework: Optional[str] = typer.Option(None, "--framework", "-f",
                                            help="A framework adapter: trl, verl, openrlhf or any installed one."),
    overrides: Optional[list[str]] = OverrideOption,
    profile: Optional[str] = typer.Option(None, help="Apply one of the recipe's profiles (e.g. laptop)."),
    as_json: bool = JsonOption,
) -> None:
    """The resolved recipe with the source of each value, or its native form for one framework."""
    recipe = load_recipe(name, parse_overrides(overrides or []), profile)
    if framework:
        config = _adapter(framework).describe(recipe)
        if as_json:
            _print_json(dataclasses.asdict(config))
            return
        console.print(_table(f"{recipe.name} on {framework}", ["recipe key", "value", framework, "status", "note"],
                             [[m.key, m.value, m.setting, m.status, m.note] for m in config.mappings]))
        console.print(f"native {framework} configuration:")
        console.print_json(json.dumps(config.native, default=str))
        if config.setup:
            console.print(config.setup, soft_wrap=True, markup=False)
        if config.command:
            console.print(" ".join(config.command), soft_wrap=True, markup=False)
        return
    if as_json:
        _print_json(recipe_to_dict(recipe))
        return
    console.print(Text.assemble((recipe.name, "bold"), f": {recipe.description}"))
    rows = _recipe_rows(recipe)
    console.print(_table("settings", ["key", "value", "source"], [[r["key"], r["value"], r["source"]] for r in rows]))
    for choice in recipe.choices:
        options = "; ".join(f"{value}: {who}" for value, who in choice.options.items())
        console.print(Text.assemble(("choice", "bold"), f" {choice.key} = {rows_value(rows, choice.key)!r} ({options})"
                                    f"\n  {choice.why}"))


def recipe_arguments(name: str, values: dict[str, Any], profile: str | None) -> tuple[str, ...]:
    """``name``, ``--profile`` and one ``-o KEY=VALUE`` per override (TOML values): the same recipe again."""
    args = [name, *(["--profile", profile] if profile else [])]
    for key, value in values.items():
        args += ["-o", f"{key}={toml_value(value)}"]
    return tuple(args)


def toml_value(value: Any) -> str:
    """``value`` as one line of TOML (what ``-o KEY=VALUE`` parses back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def rows_value(rows: list[dict[str, Any]], key: str) -> Any:
    return next(row["value"] for row in rows if row["key"] == key)


def run_command(
    recipe_name: Optional[str] = typer.Argument(None, metavar="RECIPE"),
    framework: str = typer.Option("trl", "--framework", "-f",
                                  help="A framework adapter: trl, verl, openrlhf or any installed one."),
    overrides: Optional[list[str]] = OverrideOption,
    profile: Optional[str] = typer.Option(None, help="A recipe profile; the laptop profile is used for TinyAgent."),
    verifier: Optional[str] = typer.Option(None, help="Swap the verifier, e.g. public_tests."),
    environment: Optional[str] = typer.Option(None, help="Swap the environment, e.g. bugfix_agent (an agent "
                                                         "program through the gateway)."),
    advantage: Optional[str] = typer.Option(None, help="Swap the advantage estimator, e.g. grpo."),
    correction: Optional[str] = typer.Option(None, help="Swap the mismatch correction, e.g. icepop."),
    seed: Optional[int] = typer.Option(None, help="Training seed."),
    steps: Optional[int] = typer.Option(None, help="Training steps."),
    lora: bool = typer.Option(False, "--lora", help="Train a LoRA adapter instead of every weight."),
    model: Optional[str] = typer.Option(None, help="A local Hugging Face causal LM instead of TinyAgent."),
    out: Optional[Path] = typer.Option(None, help="Run folder."),
    resume: Optional[Path] = typer.Option(None, help="Continue the run in this folder from its last checkpoint."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run, run nothing."),
    report_to: str = typer.Option("none", "--report-to",
                                  help="Experiment loggers, comma-separated: tensorboard, wandb, trackio or none."),
    ranks: Optional[int] = typer.Option(None, help="Data-parallel trainer ranks (verl, OpenRLHF); default one per "
                                                   "GPU, one on a CPU."),
    nodes: int = typer.Option(1, help="Ray nodes the ranks spread over; more than one joins the cluster at "
                                      "RAY_ADDRESS."),
) -> None:
    """Run a recipe through a framework adapter, or resume a run folder."""
    loggers = parse_loggers(report_to)
    manager = get_plugin_manager()
    if resume is not None:
        run = RunDir(resume)
        recipe, framework = run.load_recipe(), run.run_info()["framework"]
        recipe_args: tuple[str, ...] = (str(run.recipe_file),)
    elif recipe_name is None:
        raise RecipeError("name a recipe to run (agentrl recipes list), or --resume RUN_DIR")
    else:
        values = parse_overrides(overrides or [])
        for key, value in (("verifier.names", verifier and [verifier]), ("environment.name", environment),
                           ("advantage.estimator", advantage),
                           ("correction.name", correction), ("train.seed", seed), ("train.steps", steps),
                           ("train.lora", lora or None)):
            if value is not None:
                values[key] = value
        recipe = load_recipe(recipe_name, values, profile or default_profile(recipe_name, model))
        recipe_args = recipe_arguments(recipe_name, values, profile)
    for kind, names in (("advantage", [recipe.advantage.estimator]), ("correction", [recipe.correction.name]),
                        ("policy_loss", [recipe.loss.policy]), ("turn_reward", [recipe.turn_reward.name]),
                        ("environment", [recipe.environment.name]),
                        ("verifier", recipe.verifier.names)):
        for component in names:
            manager.get(kind, component)
    if dry_run:  # the environment's own constructor checks its options' values, as the run will
        close_environment(build_environment(recipe.environment, manager))
    adapter = _adapter(framework)
    adapter.run(recipe, RunOptions(run_dir=out, model=model, resume=resume, dry_run=dry_run, report_to=loggers,
                                   recipe_args=recipe_args, ranks=ranks, nodes=nodes))


def build_app(manager: PluginManager | None = None) -> typer.Typer:
    """The ``agentrl`` app with the core commands and every plugin's commands."""
    app = typer.Typer(help="agentrl: agentic-RL plugins for verl, TRL and OpenRLHF.", no_args_is_help=True,
                      pretty_exceptions_enable=False)
    app.command("plugins")(plugins_command)
    app.add_typer(recipes_app, name="recipes")
    app.command("run")(run_command)
    app.command("compare")(compare_command)
    app.command("experiment")(experiment_command)
    app.command("gateway")(gateway_command)
    (manager or get_plugin_manager()).call_each("agentrl_register_commands", cli=app)
    return app


def main() -> None:
    try:
        build_app()()
    except AgentRLError as error:
        _exit_with(error)
    except (OSError, RuntimeError) as error:  # a full disk or a read-only folder is said as such
        clear = storage_error(error)
        if clear is None:
            raise
        _exit_with(clear)


def _exit_with(error: AgentRLError) -> None:
    Console(stderr=True).print(Text.assemble(("error:", "bold red"), f" {error}"), highlight=False)
    sys.exit(2)
