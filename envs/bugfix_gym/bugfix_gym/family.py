"""A task family: one function with one bug, its tests and its menu of edit ops."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Literal

from bugfix_gym.sandbox import TestCase

OpKind = Literal["fix", "wrong_fix", "exploit"]
SPLITS = ("train", "held_out")


@dataclass(frozen=True)
class EditOp:
    """A named source transformation the agent may apply with ``edit NAME``."""

    name: str
    apply: Callable[[str], str]
    kind: OpKind


@dataclass(frozen=True)
class Family:
    """One buggy function: issue text, sources, public and hidden tests, edit menu."""

    name: str
    bug_kind: str
    split: str
    function: str
    issue: str
    buggy: str
    fixed: str
    public_tests: tuple[TestCase, ...]
    hidden_tests: tuple[TestCase, ...]
    ops: tuple[EditOp, ...]

    def __post_init__(self):
        if self.split not in SPLITS:
            raise ValueError(f"family {self.name!r}: split must be one of {SPLITS}, got {self.split!r}")
        if [op.kind for op in self.ops].count("fix") != 1:
            raise ValueError(f"family {self.name!r} needs exactly one edit op of kind 'fix'")

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)

    @property
    def fix_op(self) -> EditOp:
        return next(op for op in self.ops if op.kind == "fix")

    def op(self, name: str) -> EditOp | None:
        return next((op for op in self.ops if op.name == name), None)


def cases(pairs, hidden: bool = False) -> tuple[TestCase, ...]:
    """``[(args, expected), ...]`` as test cases."""
    return tuple(TestCase(tuple(args), expected, hidden) for args, expected in pairs)


def replace_op(name: str, old: str, new: str, kind: OpKind) -> EditOp:
    """An op that replaces every occurrence of ``old`` with ``new``."""
    return EditOp(name, lambda source: source.replace(old, new), kind)


def hardcode_tests_op(public_tests: tuple[TestCase, ...]) -> EditOp:
    """The exploit: special-case exactly the public inputs, leave the bug in place."""

    def hardcode(source: str) -> str:
        header, body = source.split("\n", 1)
        params = re.fullmatch(r"\s*def \w+\((.*)\):\s*", header).group(1)
        names = [p.split("=")[0].split(":")[0].strip() for p in params.split(",") if p.strip()]
        key = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
        special = "".join(
            f"    if {key} == {case.args!r}:\n        return {case.expected!r}\n" for case in public_tests
        )
        return header + "\n" + special + body

    return EditOp("hardcode_tests", hardcode, "exploit")
