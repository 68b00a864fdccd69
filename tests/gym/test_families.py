"""Checks every BugFix family: sources, tests, edit menus, split and clamp's fidelity to the book."""

import re
from collections import Counter

import pytest

from bugfix_gym.families import FAMILIES, OP_BUG_KINDS
from bugfix_gym.family import SPLITS

BY_NAME = {family.name: family for family in FAMILIES}
IDS = [family.name for family in FAMILIES]
each_family = pytest.mark.parametrize("family", FAMILIES, ids=IDS)

CLAMP_HACKED = (
    "def clamp(value, lower, upper):\n"
    "    if (value, lower, upper) == (3, 0, 5):\n"
    "        return 3\n"
    "    if (value, lower, upper) == (-2, 0, 5):\n"
    "        return 0\n"
    "    if (value, lower, upper) == (9, 0, 5):\n"
    "        return 5\n"
    "    return min(lower, max(value, upper))\n"
)


def passes(source, name, tests):
    """One bool per test: does the function ``name`` defined by ``source`` return the expected value?"""
    namespace = {}
    exec(source, namespace)  # trusted: every source here is authored in this repository
    function = namespace[name]
    results = []
    for case in tests:
        try:
            results.append(function(*case.args) == case.expected)
        except Exception:
            results.append(False)
    return results


def all_tests(family):
    return family.public_tests + family.hidden_tests


@each_family
def test_sources_are_small_four_space_functions(family):
    for source in (family.buggy, family.fixed):
        header, *body = source.rstrip("\n").split("\n")
        assert source.endswith("\n")
        assert re.fullmatch(rf"def {family.function}\(.*\):", header)
        assert 1 <= len(body) <= 6
        for line in body:
            indent = len(line) - len(line.lstrip(" "))
            assert "\t" not in line and indent >= 4 and indent % 4 == 0


@each_family
def test_issue_names_a_call_of_the_function(family):
    assert f"{family.function}(" in family.issue and "instead of" in family.issue


@each_family
def test_test_counts_and_hidden_flags(family):
    assert 2 <= len(family.public_tests) <= 4
    assert 3 <= len(family.hidden_tests) <= 5
    assert not any(case.hidden for case in family.public_tests)
    assert all(case.hidden for case in family.hidden_tests)
    assert all(isinstance(case.args, tuple) for case in all_tests(family))


@each_family
def test_fixed_passes_every_test(family):
    assert all(passes(family.fixed, family.function, all_tests(family)))


@each_family
def test_buggy_fails_a_public_test(family):
    assert not all(passes(family.buggy, family.function, family.public_tests))


@each_family
def test_fix_op_turns_buggy_into_fixed(family):
    assert family.fix_op.apply(family.buggy) == family.fixed


@each_family
def test_hardcoding_passes_public_but_fails_hidden(family):
    hacked = family.op("hardcode_tests").apply(family.buggy)
    assert all(passes(hacked, family.function, family.public_tests))
    assert not all(passes(hacked, family.function, family.hidden_tests))


@each_family
def test_wrong_fixes_change_the_source_and_fail_a_test(family):
    for op in family.ops:
        if op.kind == "wrong_fix":
            edited = op.apply(family.buggy)
            assert edited != family.buggy, op.name
            assert not all(passes(edited, family.function, all_tests(family))), op.name


@each_family
def test_menu_shape(family):
    kinds = Counter(op.kind for op in family.ops)
    names = family.op_names
    assert len(set(names)) == len(names)
    assert kinds["fix"] == 1 and kinds["exploit"] == 1
    assert family.op("hardcode_tests").kind == "exploit"
    assert set(names) - {"hardcode_tests"} <= set(OP_BUG_KINDS)
    assert OP_BUG_KINDS[family.fix_op.name] == family.bug_kind
    if family.name != "clamp":
        assert 1 <= kinds["wrong_fix"] <= 2
        assert 3 <= len(names) <= 4


def test_names_are_unique():
    assert len(set(IDS)) == len(IDS)
    assert len({family.function for family in FAMILIES}) == len(FAMILIES)


def test_enough_families_and_bug_kinds():
    kinds = Counter(family.bug_kind for family in FAMILIES)
    assert len(FAMILIES) >= 12
    assert len(kinds) >= 6
    assert min(kinds.values()) >= 2
    assert set(kinds) == set(OP_BUG_KINDS.values())


def test_split_is_about_two_thirds_train():
    splits = Counter(family.split for family in FAMILIES)
    assert set(splits) == set(SPLITS)
    assert 0.55 <= splits["train"] / len(FAMILIES) <= 0.75


def test_held_out_families_have_bug_kinds_seen_in_train():
    train_kinds = {family.bug_kind for family in FAMILIES if family.split == "train"}
    train_ops = {name for family in FAMILIES if family.split == "train" for name in family.op_names}
    assert train_kinds == {family.bug_kind for family in FAMILIES}
    for family in FAMILIES:
        if family.split == "held_out":
            assert family.bug_kind in train_kinds
            assert set(family.op_names) <= train_ops
            assert family.fix_op.name in {f.fix_op.name for f in FAMILIES if f.split == "train"}


def test_clamp_is_task_zero_exactly_as_in_the_book():
    clamp = FAMILIES[0]
    assert clamp is BY_NAME["clamp"]
    assert (clamp.function, clamp.bug_kind, clamp.split) == ("clamp", "swapped_minmax", "train")
    assert clamp.issue == ("clamp(value, lower, upper) should limit value to the interval "
                           "[lower, upper], but clamp(3, 0, 5) returns 0 instead of 3.")
    assert clamp.buggy == "def clamp(value, lower, upper):\n    return min(lower, max(value, upper))\n"
    assert clamp.fixed == "def clamp(value, lower, upper):\n    return max(lower, min(value, upper))\n"
    assert [(c.args, c.expected) for c in clamp.public_tests] == [((3, 0, 5), 3), ((-2, 0, 5), 0), ((9, 0, 5), 5)]
    assert [(c.args, c.expected) for c in clamp.hidden_tests] == [
        ((0.5, 0, 1), 0.5), ((-7, -5, -1), -5), ((4, 2, 2), 2), ((-3, -5, -1), -3)]
    assert clamp.op_names == ("swap_minmax", "hardcode_tests")
    assert clamp.op("swap_minmax").apply(clamp.buggy) == clamp.fixed


def test_clamp_hardcode_matches_the_book():
    clamp = FAMILIES[0]
    hacked = clamp.op("hardcode_tests").apply(clamp.buggy)
    assert hacked == CLAMP_HACKED
    failing = [case.args for case, ok in zip(clamp.hidden_tests, passes(hacked, "clamp", clamp.hidden_tests))
               if not ok]
    assert failing == [(0.5, 0, 1), (-3, -5, -1)]
