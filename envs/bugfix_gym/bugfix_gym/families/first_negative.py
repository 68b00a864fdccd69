"""first_negative: the loop tests ``v > 0`` and returns the first positive value."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

HEADER = "def first_negative(values):\n"
ISSUE = ("first_negative(values) should return the first value below zero, or None if there is none, "
         "but first_negative([3, -2, 5]) returns 3 instead of -2.")
BUGGY = HEADER + "    for v in values:\n        if v > 0:\n            return v\n    return None\n"
FIXED = HEADER + "    for v in values:\n        if v < 0:\n            return v\n    return None\n"
PUBLIC = cases([(([3, -2, 5],), -2), (([],), None), (([0, -1],), -1)])
HIDDEN = cases([(([1, 2, 3],), None), (([-4, -5],), -4), (([0],), None), (([2.5, -0.5],), -0.5)], hidden=True)

FAMILY = Family(
    name="first_negative",
    bug_kind="inverted_comparison",
    split="train",
    function="first_negative",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("flip_comparison", "v > 0", "v < 0", "fix"),
        replace_op("extend_range", "v > 0", "v >= 0", "wrong_fix"),
        replace_op("guard_empty", HEADER, HEADER + "    if not values:\n        return None\n", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
