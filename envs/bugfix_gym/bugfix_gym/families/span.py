"""span: the difference max - min is computed as min - max."""

from bugfix_gym.families.clamp import swap_minmax
from bugfix_gym.family import EditOp, Family, cases, hardcode_tests_op, replace_op

ISSUE = ("span(values) should return the largest value minus the smallest, "
         "but span([1, 4, 2]) returns -3 instead of 3.")
BUGGY = "def span(values):\n    return min(values) - max(values)\n"
FIXED = "def span(values):\n    return max(values) - min(values)\n"
PUBLIC = cases([(([1, 4, 2],), 3), (([5],), 0), (([-3, 7],), 10)])
HIDDEN = cases([(([2, 2, 2],), 0), (([0, -5, 10, 3],), 15), (([1.5, 0.5],), 1.0), (([-1, -9],), 8)], hidden=True)

FAMILY = Family(
    name="span",
    bug_kind="swapped_minmax",
    split="train",
    function="span",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        EditOp("swap_minmax", swap_minmax, "fix"),
        replace_op("fix_operator", "min(values) - max(values)", "min(values) + max(values)", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
