"""largest: ``max`` of an empty sequence raises instead of giving None."""

from bugfix_gym.families.clamp import swap_minmax
from bugfix_gym.family import EditOp, Family, cases, hardcode_tests_op, replace_op

HEADER = "def largest(values):\n"
ISSUE = ("largest(values) should return the largest value, or None for an empty sequence, "
         "but largest([]) raises ValueError instead of returning None.")
BUGGY = HEADER + "    return max(values)\n"
FIXED = HEADER + "    if not values:\n        return None\n    return max(values)\n"
PUBLIC = cases([(([3, 9, 2],), 9), (([],), None), (([-5],), -5)])
HIDDEN = cases([(((),), None), (([-4, -1],), -1), (((2, 5),), 5), (([1.5, 1],), 1.5)], hidden=True)

FAMILY = Family(
    name="largest",
    bug_kind="missed_edge_case",
    split="train",
    function="largest",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("guard_empty", HEADER, HEADER + "    if not values:\n        return None\n", "fix"),
        EditOp("swap_minmax", swap_minmax, "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
