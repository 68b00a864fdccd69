"""Your own ``train_ppo_ray`` flags against the recipe: the core's one rule (:mod:`agentrl_plugins.user_config`),
in OpenRLHF's driver before any actor is built.

For each flag the recipe or the adapter decides (:func:`agentrl_openrlhf.config.decided`): not on your
command line, the recipe's value is added and listed; equal to it, nothing happens; any other value, or one you
typed whatever it equals (OpenRLHF's default included), is a
:class:`~agentrl_plugins.user_config.ConfigConflictError` naming every such flag. Your values, the flags you typed
(:func:`typed_flags`) and OpenRLHF's defaults come from OpenRLHF's own parser; the origin table lists each flag as
the recipe's, yours or the prepared command's (``run.json``'s ``command``: the CPU backend's choices and the
launch's paths). With changes, OpenRLHF's own parsing and validation
run again on your flags plus the recipe's (``train_ppo_ray`` derives settings from others, such as the
vLLM batch size from ``rollout.batch_size``), and the driver's arguments become their result.

The runtime-env hook installs the check: ``train_ppo_ray`` calls ``ray.init`` (which calls the hook) and
then ``get_strategy(args)``, which the hook wraps in the driver's ``__main__``.
"""

from __future__ import annotations

import argparse
import functools
import runpy
import sys
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType, SimpleNamespace
from typing import Any, Callable

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.user_config import (
    CPU,
    LAUNCH,
    Setting,
    SettingChange,
    origins,
    reconcile,
    same,
    settings_table,
)

from agentrl_openrlhf.config import CLI_MODULE, decided, flag_words
from agentrl_openrlhf.cpu.launch import cpu_cluster_flags

WHERE = "train_ppo_ray command line"
CONFLICT_REMEDY = ("Drop or change these flags in your command, or change the recipe instead "
                   "(agentrl openrlhf prepare RECIPE -o KEY=VALUE, then the command it prints).")


class _Stop(Exception):
    """Carries what ``train_ppo_ray``'s own code had computed when it was stopped."""

    def __init__(self, value: Any):
        super().__init__()
        self.value = value


def run_cli(argv: list[str], stop_at: str) -> Any:
    """``python -m openrlhf.cli.train_ppo_ray ARGV``'s own code in this process, stopped before it trains:
    at ``hierarchize`` (the flags as parsed, by flag name) or at ``get_strategy`` (the validated arguments)."""
    import openrlhf.utils
    import openrlhf.utils.config
    import ray

    def stop(args: Any) -> None:
        raise _Stop(dict(vars(args)) if stop_at == "hierarchize" else args)

    saved: list[tuple[Any, str, Callable[..., Any]]] = [
        (openrlhf.utils.config, "hierarchize", openrlhf.utils.config.hierarchize),
        (openrlhf.utils, "get_strategy", openrlhf.utils.get_strategy), (ray, "is_initialized", ray.is_initialized)]
    argv_before = sys.argv
    setattr(openrlhf.utils.config if stop_at == "hierarchize" else openrlhf.utils, stop_at, stop)
    ray.is_initialized = lambda: True
    sys.argv = [CLI_MODULE, *argv]
    try:
        runpy.run_module(CLI_MODULE, run_name="__main__")
    except _Stop as stopped:
        return stopped.value
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
        sys.argv = argv_before
    raise AgentRLError(f"{CLI_MODULE} finished without reaching {stop_at}: OpenRLHF's command line has changed")


@functools.cache
def openrlhf_defaults() -> Mapping[str, Any]:
    """``train_ppo_ray``'s own defaults, by flag name (its parser on an empty command line), read once."""
    return MappingProxyType(run_cli([], "hierarchize"))


def typed_flags(argv: list[str]) -> dict[str, Any]:
    """The flags ``argv`` sets, by name, with their values as OpenRLHF's own parser reads them; a flag left out is
    absent, not its default."""
    parse_args = argparse.ArgumentParser.parse_args

    def without_defaults(parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        parser._defaults.clear()
        return parse_args(parser, *args, **kwargs)

    argparse.ArgumentParser.parse_args = without_defaults  # type: ignore[method-assign]
    try:
        return run_cli(argv, "hierarchize")
    finally:
        argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]


def reconcile_flags(argv: list[str], recipe: Recipe) -> tuple[list[SettingChange], SimpleNamespace | None]:
    """The rule on ``argv``: the changes, and OpenRLHF's validated arguments with them (None without any)."""
    settings = decided(recipe)
    yours, defaults = run_cli(argv, "hierarchize"), openrlhf_defaults()
    unknown = [s.name for s in settings if s.name not in defaults]
    if unknown:
        raise AgentRLError(f"{CLI_MODULE} has no flags {unknown}: OpenRLHF's command line has changed")
    changes = reconcile(settings, yours, defaults, where=WHERE, recipe=recipe.name, remedy=CONFLICT_REMEDY,
                        typed=typed_flags(argv))
    if not changes:
        return [], None
    return changes, run_cli([*argv, *flag_words({c.name: c.value for c in changes})], "get_strategy")


def setting_rows(argv: list[str], recipe: Recipe, prepared: Sequence[str] = ()) -> list[Setting]:
    """The origin table of ``argv`` after the rule: the recipe's flags, then every other flag typed, the prepared
    command's (``prepared``, its flags) or yours (:func:`repeated_flags`: a prepared flag typed again is yours)."""
    typed = typed_flags(argv)
    yours = repeated_flags(argv, prepared)
    return origins(decided(recipe), openrlhf_defaults(), typed,
                   project_origins(recipe, typed, typed_flags(list(prepared)), yours))


def repeated_flags(argv: Sequence[str], prepared: Sequence[str]) -> set[str]:
    """The flags ``argv`` names more often than the prepared command does (by name, without ``--``): typed again
    by the user, whatever their value."""
    def counts(words: Sequence[str]) -> Counter[str]:
        return Counter(word[2:].split("=", 1)[0] for word in words if word.startswith("--"))

    typed, ours = counts(argv), counts(prepared)
    return {name for name, count in typed.items() if count > ours[name]}


def project_origins(recipe: Recipe, typed: dict[str, Any], prepared: dict[str, Any],
                    yours: Collection[str]) -> dict[str, str]:
    """The typed flags with the prepared command's values that the user's own words do not set (``yours``): the CPU
    backend's choices and the launch's."""
    cpu = cpu_cluster_flags(recipe)
    return {name: CPU if name in cpu else LAUNCH for name, value in typed.items()
            if name in prepared and same(value, prepared[name]) and name not in yours}


def prepared_flags(run: RunDir | None) -> list[str]:
    """The flags of the command ``agentrl openrlhf prepare`` wrote for ``run`` (none for a command of one's own)."""
    command = run.run_info().get("command") if run is not None and run.run_file.is_file() else None
    return list(command[command.index(CLI_MODULE) + 1:]) if command and CLI_MODULE in command else []


def checked_get_strategy(original: Callable[[Any], Any], recipe: Recipe, run: RunDir | None) -> Callable[[Any], Any]:
    """``get_strategy`` of the driver, after the rule has been applied to its arguments and the origin table
    printed and recorded (with the command as it ran, ``run.json``'s ``command_as_run``)."""

    def get_strategy(args: Any) -> Any:
        argv = sys.argv[1:]
        changes, validated = reconcile_flags(argv, recipe)
        if validated is not None:
            vars(args).clear()
            vars(args).update(vars(validated))
        rows = setting_rows(argv, recipe, prepared_flags(run))
        print(settings_table(rows, WHERE, recipe.name), file=sys.stderr, flush=True)
        if run is not None and run.run_file.is_file():
            run.update_info(config_changes=[[c.name, repr(c.default), repr(c.value), c.source] for c in changes],
                            settings=[row.row() for row in rows],
                            command_as_run=[sys.executable, "-m", CLI_MODULE, *argv])
        return original(args)

    return get_strategy


def in_train_ppo_ray() -> bool:
    """Whether this process is ``python -m openrlhf.cli.train_ppo_ray``'s driver."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == CLI_MODULE


def install_check(recipe: Recipe, run: RunDir | None) -> bool:
    """Wrap ``get_strategy`` in the driver's ``__main__`` when it is ``train_ppo_ray``; whether it was."""
    main = sys.modules.get("__main__")
    if not in_train_ppo_ray() or not hasattr(main, "get_strategy"):
        return False
    if not getattr(main.get_strategy, "agentrl_checked", False):
        main.get_strategy = checked_get_strategy(main.get_strategy, recipe, run)
        main.get_strategy.agentrl_checked = True
    return True
