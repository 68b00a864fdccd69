"""The plugin manager: loads the built-ins and the ``agentrl`` entry points, builds registries.

Set ``AGENTRL_PLUGINS=a,b`` to load only those entry points, and
``AGENTRL_DISABLE_PLUGINS=c`` to skip some; the built-in plugins always load.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import os
import sys
import traceback
import types
from dataclasses import dataclass
from typing import Any, Iterator

import pluggy

from agentrl_plugins import hookspecs
from agentrl_plugins.components import KINDS, Component
from agentrl_plugins.errors import DuplicateNameError, UnknownNameError, did_you_mean

ENTRY_POINT_GROUP = "agentrl"
ALLOW_ENV = "AGENTRL_PLUGINS"
BLOCK_ENV = "AGENTRL_DISABLE_PLUGINS"
CORE_DISTRIBUTION = "agentrl-plugins"
EVENT_HOOKS = ("agentrl_episode_end", "agentrl_step_end")
"""Hooks that watch a run: an implementation that raises is reported once and disabled; the run goes on."""
DEFAULT_PLUGINS = (
    "agentrl_plugins.default_plugins.advantages",
    "agentrl_plugins.default_plugins.corrections",
    "agentrl_plugins.default_plugins.policy_losses",
    "agentrl_plugins.default_plugins.turn_rewards",
    "agentrl_plugins.default_plugins.recipes",
    "agentrl_plugins.default_plugins.experiments",
)


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as ``agentrl plugins`` shows it; ``status`` is ok, broken or disabled."""

    name: str
    distribution: str
    version: str
    status: str
    entry_point: str = ""
    error: str = ""


@dataclass(frozen=True)
class Registered:
    """A component record with the plugin and distribution it came from."""

    record: Component
    plugin: str
    distribution: str


class Registry:
    """The components of one kind, by unique name."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Registered] = {}

    def add(self, entry: Registered) -> None:
        name = entry.record.name
        if name in self._entries:
            first = self._entries[name]
            raise DuplicateNameError(
                f"{self.kind} {name!r} is registered twice: by plugin {first.plugin!r} "
                f"(distribution {first.distribution}) and by plugin {entry.plugin!r} "
                f"(distribution {entry.distribution}). Uninstall one, or skip it with {BLOCK_ENV}=<plugin>."
            )
        self._entries[name] = entry

    def entry(self, name: str) -> Registered:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def get(self, name: str) -> Any:
        """The registered record called ``name``; unknown names list the close matches."""
        return self.entry(name).record

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Registered]:
        return iter(self._entries[name] for name in self.names())


def _env_list(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    return None if value is None else {item.strip() for item in value.split(",") if item.strip()}


class PluginManager(pluggy.PluginManager):
    """pluggy's manager for project ``agentrl``, with provenance and broken-plugin records."""

    def __init__(self, load_entry_points: bool = True):
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self._registries: dict[str, Registry] | None = None
        from agentrl_plugins import __version__ as core_version

        for module_name in DEFAULT_PLUGINS:
            self.add_plugin(importlib.import_module(module_name), module_name, CORE_DISTRIBUTION, core_version)
        if load_entry_points:
            self.load_entry_points()

    def add_plugin(self, plugin: Any, name: str, distribution: str, version: str = "", entry_point: str = "") -> bool:
        """Register ``plugin`` after validating its hooks; a failure marks it broken and returns False. Its
        event hooks are registered watched (:meth:`_watched`)."""
        impls = {attr: opts for attr in dir(plugin) if (opts := self.parse_hookimpl_opts(plugin, attr)) is not None}
        asynchronous = [attr for attr in impls if inspect.iscoroutinefunction(getattr(plugin, attr))]
        if asynchronous:
            return self._mark_broken(name, distribution, version, entry_point, "; ".join(
                f"{hook} is async; agentrl calls its hooks as plain functions (drop the async)"
                for hook in asynchronous))
        plugin = self._with_watched_events(plugin, name, impls)
        try:
            self.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as error:
            return self._mark_broken(name, distribution, version, entry_point, str(error))
        unknown = [caller.name for caller in self.get_hookcallers(plugin) or () if caller.spec is None]
        if unknown:
            self.unregister(plugin)
            known = [name for name in dir(hookspecs) if name.startswith("agentrl_")]
            problem = "; ".join(f"implements unknown hook {hook!r}.{did_you_mean(hook, known)}" for hook in unknown)
            return self._mark_broken(name, distribution, version, entry_point, problem)
        self.infos[name] = PluginInfo(name, distribution, version, "ok", entry_point)
        self._registries = None
        return True

    def _with_watched_events(self, plugin: Any, name: str, impls: dict[str, Any]) -> Any:
        """``plugin`` itself, or, when it implements an event hook, a namespace of its hook implementations
        (``impls``: attribute -> hookimpl options) with each event hook watched."""
        events = {attr for attr, opts in impls.items() if (opts.get("specname") or attr) in EVENT_HOOKS}
        if not events:
            return plugin
        return types.SimpleNamespace(__name__=getattr(plugin, "__name__", name), **{
            attr: self._watched(name, impls[attr].get("specname") or attr, getattr(plugin, attr))
            if attr in events else getattr(plugin, attr) for attr in impls})

    def _watched(self, plugin: str, hook: str, function: Any) -> Any:
        """``function`` (an event hook of ``plugin``) that, on its first exception, is reported on stderr,
        marks the plugin broken and does nothing after; the run goes on."""
        failed = False

        @functools.wraps(function)
        def watched(*args: Any, **kwargs: Any) -> Any:
            nonlocal failed
            if failed:
                return None
            try:
                return function(*args, **kwargs)
            except Exception as error:
                failed = True
                info = self._mark_broken_again(plugin, f"{hook} raised {error!r}; disabled for the rest of the run")
                print(f"agentrl: plugin {plugin!r} ({info.distribution}): {hook} raised {error!r}; it is disabled "
                      "for the rest of this run, which goes on", file=sys.stderr)
                return None

        return watched

    def _mark_broken(self, name: str, distribution: str, version: str, entry_point: str, error: str) -> bool:
        self.infos[name] = PluginInfo(name, distribution, version, "broken", entry_point, error)
        return False

    def _mark_broken_again(self, name: str, error: str) -> PluginInfo:
        """Mark the loaded plugin ``name`` broken with ``error``; returns its new record."""
        info = self.infos[name]
        self._mark_broken(name, info.distribution, info.version, info.entry_point, error)
        return self.infos[name]

    def call_each(self, hook: str, **kwargs: Any) -> None:
        """Call every implementation of ``hook`` on its own: one that raises (or exits) marks its plugin broken
        (with its hooks unregistered) and the others still run. Ctrl-C still stops the program."""
        for impl in list(getattr(self.hook, hook).get_hookimpls()):
            try:
                impl.function(**{name: kwargs[name] for name in impl.argnames})
            except (Exception, SystemExit) as error:
                self._drop(impl.plugin_name, f"{hook} failed: {error!r}")

    def _drop(self, name: str, error: str) -> None:
        """Mark plugin ``name`` broken and unregister it, so none of its other hooks runs."""
        self._mark_broken_again(name, error)
        if self.has_plugin(name):
            self.unregister(name=name)
        self._registries = None

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Import every allowed entry point of ``group``; import errors are recorded, not raised."""
        allowed, blocked = _env_list(ALLOW_ENV), _env_list(BLOCK_ENV) or set()
        for entry_point in importlib.metadata.entry_points(group=group):
            distribution = entry_point.dist.name if entry_point.dist else "?"
            version = entry_point.dist.version if entry_point.dist else ""
            label = f"{entry_point.name} = {entry_point.value}"
            if entry_point.name in blocked or (allowed is not None and entry_point.name not in allowed):
                self.infos[entry_point.name] = PluginInfo(entry_point.name, distribution, version, "disabled", label)
                continue
            name = entry_point.name
            if self.has_plugin(name):
                if self.infos[name].distribution == distribution:
                    continue
                name = f"{entry_point.name}@{distribution}"
                label += f" (the name {entry_point.name!r} is also {self.infos[entry_point.name].distribution}'s)"
                print(f"agentrl: entry point {entry_point.name!r} of {distribution} has the name of "
                      f"{self.infos[entry_point.name].distribution}'s; both are loaded, this one as {name!r}",
                      file=sys.stderr)
            try:
                plugin = entry_point.load()
            except (Exception, SystemExit):  # a plugin's own exit is its failure; Ctrl-C still stops the program
                self._mark_broken(name, distribution, version, label, traceback.format_exc(limit=-3).strip())
                continue
            self.add_plugin(plugin, name, distribution, version, label)

    def registry(self, kind: str) -> Registry:
        """All components of ``kind`` (one of :data:`~agentrl_plugins.components.KINDS`)."""
        if kind not in KINDS:
            raise UnknownNameError("component kind", kind, KINDS)
        if self._registries is None:
            self._registries = self._collect()
        return self._registries[kind]

    def get(self, kind: str, name: str) -> Any:
        return self.registry(kind).get(name)

    def _collect(self) -> dict[str, Registry]:
        """Every plugin's records, all or nothing per plugin: one failing hook drops the plugin's others too."""
        collected: dict[str, list[Component]] = {}
        failed: set[str] = set()
        for record_type in KINDS.values():
            for impl in reversed(getattr(self.hook, record_type.hook).get_hookimpls()):
                if impl.plugin_name in failed:
                    continue
                records = collected.setdefault(impl.plugin_name, [])
                try:
                    impl.function(register=functools.partial(_collect_record, records, record_type))
                except (Exception, SystemExit) as error:
                    failed.add(impl.plugin_name)
                    collected.pop(impl.plugin_name)
                    self._drop(impl.plugin_name, f"{record_type.hook} failed, so none of its components is "
                                                 f"registered and none of its hooks runs: {error!r}")
        registries = {kind: Registry(kind) for kind in KINDS}
        for plugin, records in collected.items():
            info = self.infos[plugin]
            for record in records:
                registries[record.kind].add(Registered(record, info.name, info.distribution))
        return registries

    def plugin_table(self) -> list[PluginInfo]:
        """Every plugin seen, loaded or not, sorted by name."""
        if self._registries is None:
            self._registries = self._collect()
        return sorted(self.infos.values(), key=lambda info: info.name)


def _collect_record(records: list[Component], record_type: type[Component], record: Component) -> None:
    if not isinstance(record, record_type):
        raise TypeError(f"{record_type.hook} expects {record_type.__name__} records, got {type(record).__name__}")
    records.append(record)


@functools.lru_cache(maxsize=1)
def get_plugin_manager() -> PluginManager:
    """The process-wide manager, loaded on first use."""
    return PluginManager()
