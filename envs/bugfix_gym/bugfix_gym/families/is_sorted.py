"""is_sorted: neighbours are compared with ``>=`` instead of ``<=``."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("is_sorted(values) should say whether values are in non-decreasing order, "
         "but is_sorted([1, 2, 3]) returns False instead of True.")
BUGGY = "def is_sorted(values):\n    return all(a >= b for a, b in zip(values, values[1:]))\n"
FIXED = "def is_sorted(values):\n    return all(a <= b for a, b in zip(values, values[1:]))\n"
PUBLIC = cases([(([1, 2, 3],), True), (([3, 1],), False), (([],), True)])
HIDDEN = cases([(([2, 2, 5],), True), (([5, 4, 3],), False), (([7],), True), (([1, 3, 2],), False)], hidden=True)

FAMILY = Family(
    name="is_sorted",
    bug_kind="inverted_comparison",
    split="held_out",
    function="is_sorted",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("flip_comparison", "a >= b", "a <= b", "fix"),
        replace_op("shrink_range", "a >= b", "a > b", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
