"""The recipe against a user's own framework configuration: one rule for every adapter.

A user who builds the trainer in their own code brings their own configuration (TRL's ``GRPOConfig``,
verl's Hydra overrides, OpenRLHF's flags). For every setting the recipe (or the adapter) decides:

- the user's value equals the recipe's: nothing to do;
- the user did not set it (it holds the framework's default): the recipe's value applies, and the change is
  listed;
- the user set another value: :class:`ConfigConflictError`, naming every such setting with both values,
  before anything is built.

What the user set is what they typed (``typed``: Hydra's override list, the flags on the command line), whatever
it equals; a value that only differs from the framework's default (a config file of one's own) counts as set too.
Settings the recipe leaves open (output folders, loggers, precision, ...) keep the user's value.
:func:`settings_table` lists every setting with its origin (:data:`ORIGINS`), printed where the user looks and
kept in the run folder.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from agentrl_plugins.errors import AgentRLError


@dataclass(frozen=True)
class Decided:
    """A framework setting the recipe or the adapter decides: its name, value and why (a recipe key or reason).

    ``passed`` is False for a setting the framework derives from the others: it is checked against the
    user's value, not passed to the framework.
    """

    name: str
    value: Any
    source: str
    passed: bool = True


@dataclass(frozen=True)
class SettingChange:
    """A setting the user had left at the framework's default and the recipe changed."""

    name: str
    default: Any
    value: Any
    source: str


@dataclass(frozen=True)
class SettingConflict:
    """A setting the user chose that contradicts the recipe or the adapter."""

    name: str
    yours: Any
    value: Any
    source: str


RECIPE, USER, FRAMEWORK, CPU, LAUNCH = "recipe", "user", "framework default", "project (CPU)", "project (launch)"
ORIGINS = (RECIPE, USER, FRAMEWORK, CPU, LAUNCH)
SETTING_COLUMNS = ("setting", "value", "origin", "default", "because of")
"""The columns of the origin table (:meth:`Setting.row`), on the console and in ``report.md``."""
"""Where a setting's value comes from: the recipe (or the adapter's needs), what the user typed, the framework's
default (one that follows a setting the recipe changed), the project's choice for the CPU backend, or the
launch's choice (paths, loggers, ranks) in the prepared command."""


@dataclass(frozen=True)
class Setting:
    """One row of the origin table: a setting, the value it runs with, where that comes from, the framework's
    default and why (a recipe key, a reason or the word that set it)."""

    name: str
    value: Any
    origin: str
    default: Any
    source: str

    def row(self) -> list[str]:
        """The row as run.json keeps it: name, value, origin, default (values as their repr) and source."""
        return [self.name, _show(self.value), self.origin, _show(self.default), self.source]


class ConfigConflictError(AgentRLError, ValueError):
    """The user's own configuration contradicts the recipe; the message lists every conflicting setting.

    Pickles with its type and fields (Ray carries a refusal from a worker to the driver that way)."""

    def __init__(self, where: str, recipe: str, conflicts: Sequence[SettingConflict], remedy: str):
        self.where, self.recipe, self.remedy = where, recipe, remedy
        self.conflicts = list(conflicts)
        rows = _table(["setting", "yours", "recipe needs", "because of"],
                      [[c.name, _show(c.yours), _show(c.value), c.source] for c in self.conflicts])
        super().__init__(f"your {where} contradicts recipe {recipe!r} on {len(self.conflicts)} "
                         f"setting{'s' if len(self.conflicts) != 1 else ''}:\n{rows}\n{remedy}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.where, self.recipe, self.conflicts, self.remedy), self.__dict__


def reconcile(decided: Sequence[Decided], yours: Mapping[str, Any], defaults: Mapping[str, Any], *,
              where: str, recipe: str, remedy: str, typed: Collection[str] = ()) -> list[SettingChange]:
    """Apply the rule above; returns the changes to the user's defaults, or raises naming every conflict.

    ``yours`` and ``defaults`` hold the user's and the framework's default value of each decided setting
    (a name missing from ``yours`` was not given at all, which counts as the default). A name in ``typed`` was
    set by the user whatever its value: one equal to the framework's default is a conflict, not a default.
    """
    changes, conflicts = [], []
    for setting in decided:
        default = defaults.get(setting.name)
        mine = yours.get(setting.name, default)
        if same(mine, setting.value):
            continue
        if setting.name not in typed and same(mine, default):
            changes.append(SettingChange(setting.name, default, setting.value, setting.source))
        else:
            conflicts.append(SettingConflict(setting.name, mine, setting.value, setting.source))
    if conflicts:
        raise ConfigConflictError(where, recipe, conflicts, remedy)
    return changes


def changes_table(changes: Sequence[SettingChange], where: str, recipe: str) -> str:
    """The changes as a fixed-width table with a heading line, for the console and the run folder."""
    if not changes:
        return f"recipe {recipe!r}: your {where} already agrees with the recipe on every setting it decides"
    rows = _table(["setting", "default", "recipe sets", "because of"],
                  [[c.name, _show(c.default), _show(c.value), c.source] for c in changes])
    return f"recipe {recipe!r} set {len(changes)} settings you left at their defaults in your {where}:\n{rows}"


def own_words(words: Sequence[str], prepared: Sequence[str]) -> list[str]:
    """The words of a command the user typed beside the prepared command's: those after its words where the
    command starts with them (the prepared script's ``"$@"``), else what is left once each prepared word is taken
    out once (a printed command edited in place). A prepared word typed again is the user's."""
    words, prepared = list(words), list(prepared)
    if words[:len(prepared)] == prepared:
        return words[len(prepared):]
    left = Counter(prepared)
    yours = []
    for word in words:
        if left[word]:
            left[word] -= 1
        else:
            yours.append(word)
    return yours


def origins(decided: Sequence[Decided], defaults: Mapping[str, Any], typed: Mapping[str, Any],
            project: Mapping[str, str], followers: Sequence[SettingChange] = ()) -> list[Setting]:
    """The origin table's rows: each decided setting (the recipe's), each default that follows one (the
    framework's), then each other setting typed on the command line: the project's where ``project`` names its
    origin (a word of the prepared command), else the user's. A decided setting the user typed with the same value
    says so."""
    agreed = {s.name for s in decided if s.name in typed and s.name not in project and same(typed[s.name], s.value)}
    rows = [Setting(s.name, s.value, RECIPE, defaults.get(s.name),
                    f"{s.source}; your command sets the same" if s.name in agreed else s.source) for s in decided]
    rows += [Setting(f.name, f.value, FRAMEWORK, f.default, f.source) for f in followers]
    listed = {row.name for row in rows}
    rows += [Setting(name, value, project.get(name, USER), defaults.get(name),
                     "the prepared command" if name in project else "your command")
             for name, value in typed.items() if name not in listed]
    return rows


def settings_table(settings: Sequence[Setting], where: str, recipe: str) -> str:
    """Every setting with its value, origin and the framework's default, as a fixed-width table with a heading line,
    for the console and the run folder."""
    counts = ", ".join(f"{sum(s.origin == o for s in settings)} {o}" for o in ORIGINS
                       if any(s.origin == o for s in settings))
    rows = _table(list(SETTING_COLUMNS), [s.row() for s in settings])
    return f"recipe {recipe!r}: the settings of your {where} and where each comes from ({counts}):\n{rows}"


def same(a: Any, b: Any) -> bool:
    """Equal as configuration values: enums by value, ints and floats by number (a bool only equals a bool),
    lists and tuples alike."""
    a, b = _plain(a), _plain(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _show(value: Any) -> str:
    return repr(_plain(value))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)
