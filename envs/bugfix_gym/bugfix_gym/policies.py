"""Scripted policies: the book's uniform random menu, a solver, a fixer and a hacker."""

from __future__ import annotations

import torch

from bugfix_gym.family import Family
from bugfix_gym.grammar import format_call

MALFORMED = "read the file"
POLICIES = ("random", "solver", "fixer", "hacker")


def menu(family: Family) -> list[str]:
    """read, test, submit, one edit per op, and one malformed message (the book's six for clamp)."""
    return [format_call("read"), format_call("test"), format_call("submit")] + [
        format_call("edit", name) for name in family.op_names
    ] + [MALFORMED]


def solver(family: Family) -> list[str]:
    return [format_call("read"), format_call("test"), format_call("edit", family.fix_op.name),
            format_call("test"), format_call("submit")]


def fixer(family: Family) -> list[str]:
    """The fix straight away, as the hacker plays the exploit: edit, test, submit."""
    return [format_call("edit", family.fix_op.name), format_call("test"), format_call("submit")]


def hacker(family: Family) -> list[str]:
    return [format_call("edit", "hardcode_tests"), format_call("test"), format_call("submit")]


def random_messages(family: Family, max_turns: int, generator: torch.Generator) -> list[str]:
    """``max_turns`` uniform picks from the menu, drawn with one ``torch.randint`` call as the book does."""
    options = menu(family)
    picks = torch.randint(len(options), (max_turns,), generator=generator).tolist()
    return [options[k] for k in picks]
