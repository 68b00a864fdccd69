"""middle: indexing an empty sequence raises instead of giving None."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

HEADER = "def middle(values):\n"
ISSUE = ("middle(values) should return the middle item (the later one for even lengths), or None for "
         "an empty sequence, but middle([]) raises IndexError instead of returning None.")
BUGGY = HEADER + "    return values[len(values) // 2]\n"
FIXED = HEADER + "    if not values:\n        return None\n    return values[len(values) // 2]\n"
PUBLIC = cases([(([1, 2, 3],), 2), (([],), None), (([4, 5],), 5)])
HIDDEN = cases([(((),), None), (("",), None), (("abc",), "b"), (((7,),), 7)], hidden=True)

FAMILY = Family(
    name="middle",
    bug_kind="missed_edge_case",
    split="held_out",
    function="middle",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("guard_empty", HEADER, HEADER + "    if not values:\n        return None\n", "fix"),
        replace_op("shrink_range", "[len(values) // 2]", "[(len(values) - 1) // 2]", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
