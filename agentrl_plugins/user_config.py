"""The recipe against a user's own framework configuration: one rule for every adapter.

A user who builds the trainer in their own code brings their own configuration (TRL's ``GRPOConfig``,
verl's Hydra overrides, OpenRLHF's flags). For every setting the recipe (or the adapter) decides:

- the user's value equals the recipe's: nothing to do;
- the user left the framework's default: the recipe's value applies, and the change is listed
  (:func:`changes_table`, printed where the user looks);
- the user set another value: :class:`ConfigConflictError`, naming every such setting with both values,
  before anything is built.

Settings the recipe leaves open (output folders, loggers, precision, ...) keep the user's value.
A user who sets a value equal to the framework's default cannot be told apart from one who left it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

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


class ConfigConflictError(AgentRLError, ValueError):
    """The user's own configuration contradicts the recipe; the message lists every conflicting setting."""

    def __init__(self, where: str, recipe: str, conflicts: Sequence[SettingConflict], remedy: str):
        self.conflicts = list(conflicts)
        rows = _table(["setting", "yours", "recipe needs", "because of"],
                      [[c.name, _show(c.yours), _show(c.value), c.source] for c in self.conflicts])
        super().__init__(f"your {where} contradicts recipe {recipe!r} on {len(self.conflicts)} "
                         f"setting{'s' if len(self.conflicts) != 1 else ''}:\n{rows}\n{remedy}")


def reconcile(decided: Sequence[Decided], yours: Mapping[str, Any], defaults: Mapping[str, Any], *,
              where: str, recipe: str, remedy: str) -> list[SettingChange]:
    """Apply the rule above; returns the changes to the user's defaults, or raises naming every conflict.

    ``yours`` and ``defaults`` hold the user's and the framework's default value of each decided setting
    (a name missing from ``yours`` was not given at all, which counts as the default).
    """
    changes, conflicts = [], []
    for setting in decided:
        default = defaults.get(setting.name)
        mine = yours.get(setting.name, default)
        if same(mine, setting.value):
            continue
        if same(mine, default):
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
