"""Renamed variants: the fix under another name, first in the menu, on the family's own issue and tests."""

from __future__ import annotations

import pytest
import torch

from bugfix_gym import policies
from bugfix_gym.env import BugFixGym
from bugfix_gym.families import FAMILIES
from bugfix_gym.simulate import play
from bugfix_gym.variants import menu_vocabulary, renamed_variant, renamed_variants
from bugfix_gym.verifiers import hidden_tests

TRAIN = [family for family in FAMILIES if family.split == "train"]


@pytest.fixture(scope="module")
def gym():
    suite = BugFixGym(renamed_variants=3, variant_seed=7)
    yield suite
    suite.close()


@pytest.mark.parametrize("family", TRAIN, ids=lambda family: family.name)
def test_a_variant_keeps_the_issue_and_tests_and_renames_the_fix(family):
    variant = renamed_variant(family, 1, torch.Generator().manual_seed(0))
    assert variant.name == f"{family.name}~1" and variant.split == family.split
    assert (variant.issue, variant.buggy, variant.hidden_tests) == (family.issue, family.buggy, family.hidden_tests)
    assert variant.ops[0].kind == "fix" and variant.ops[0].apply(family.buggy) == family.fix_op.apply(family.buggy)
    assert variant.ops[0].name in menu_vocabulary()
    assert len(set(variant.op_names)) == len(variant.op_names), "no two ops share a name"
    distractors = [op for op in variant.ops if op.name not in family.op_names and op.kind != "fix"]
    assert distractors and all(op.apply(family.buggy) == family.buggy for op in distractors)


def test_variants_are_drawn_from_the_seed():
    names = [v.op_names for v in renamed_variants(TRAIN, 2, seed=3)]
    assert names == [v.op_names for v in renamed_variants(TRAIN, 2, seed=3)]
    assert names != [v.op_names for v in renamed_variants(TRAIN, 2, seed=4)]
    assert sum(v.fix_op.name != f.fix_op.name for v, f in zip(renamed_variants(TRAIN, 1, seed=3), TRAIN)) >= 6


def test_the_gym_adds_variants_to_the_train_split_only(gym):
    plain = BugFixGym()
    assert len(gym.tasks("train")) == len(plain.tasks("train")) * 4
    assert [t.id for t in gym.tasks("held_out")] == [t.id for t in plain.tasks("held_out")]
    with pytest.raises(ValueError, match="renamed_variants must be >= 0"):
        BugFixGym(renamed_variants=-1)


def test_only_the_renamed_fix_solves_a_variant(gym):
    variant = next(v for v in gym.families.values()
                   if "~" in v.name and v.fix_op.name != gym.family(v.name.split("~")[0]).fix_op.name)
    original = gym.family(variant.name.split("~")[0])
    solved = gym.start(next(t for t in gym.tasks() if t.id == variant.name))
    play(solved, policies.solver(variant), 6)
    assert hidden_tests(solved.outcome()).passed
    recalled = gym.start(next(t for t in gym.tasks() if t.id == variant.name))
    play(recalled, policies.solver(original), 6)
    assert not hidden_tests(recalled.outcome()).passed
