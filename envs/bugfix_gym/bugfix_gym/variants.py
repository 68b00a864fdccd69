"""Renamed variants of a family: domain randomisation over the edit-op names.

In a variant the fix goes by another op's name (still first in the menu, as in
every family) and the rest of the menu is shuffled, with extra ops that change
nothing. The issue text and the tests stay the family's own, so the edit to make
can only be read off the menu, never recalled from the issue: training on
variants rewards the skill that carries over to held-out families. The draws are
torch's (imported on use, so loading the gym costs no torch).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from bugfix_gym.family import EditOp, Family

if TYPE_CHECKING:
    import torch


def menu_vocabulary() -> list[str]:
    """Every op name of every family except the exploit, sorted."""
    from bugfix_gym.families import FAMILIES

    return sorted({name for family in FAMILIES for name in family.op_names} - {"hardcode_tests"})


def renamed_variant(family: Family, index: int, generator: torch.Generator, max_distractors: int = 2) -> Family:
    """``family`` as ``NAME~index``: its fix renamed to a drawn op name, plus 1 to ``max_distractors`` no-op ops."""
    import torch

    others = [name for name in menu_vocabulary() if name not in family.op_names or name == family.fix_op.name]
    picks = torch.randperm(len(others), generator=generator)[: 2 + index % max_distractors]
    names = [others[i] for i in picks.tolist()]
    rest = [op for op in family.ops if op.kind != "fix"]
    rest += [EditOp(name, lambda source: source, "wrong_fix") for name in names[1:]]
    order = torch.randperm(len(rest), generator=generator).tolist()
    ops = (replace(family.fix_op, name=names[0]),) + tuple(rest[i] for i in order)
    return replace(family, name=f"{family.name}~{index}", ops=ops)


def renamed_variants(families: Sequence[Family], per_family: int, seed: int = 0,
                     max_distractors: int = 2) -> list[Family]:
    """``per_family`` renamed variants of each of ``families``, drawn from one generator seeded with ``seed``."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [renamed_variant(family, index, generator, max_distractors)
            for family in families for index in range(per_family)]
