"""days_left: the floor at zero uses ``min`` where it needs ``max``."""

from bugfix_gym.families.clamp import swap_minmax
from bugfix_gym.family import EditOp, Family, cases, hardcode_tests_op, replace_op

ISSUE = ("days_left(used, total) should return the days remaining, never below zero, "
         "but days_left(3, 10) returns 0 instead of 7.")
BUGGY = "def days_left(used, total):\n    return min(0, total - used)\n"
FIXED = "def days_left(used, total):\n    return max(0, total - used)\n"
PUBLIC = cases([((3, 10), 7), ((12, 10), 0), ((10, 10), 0)])
HIDDEN = cases([((0, 5), 5), ((1, 1), 0), ((20, 4), 0), ((2.5, 4), 1.5)], hidden=True)

FAMILY = Family(
    name="days_left",
    bug_kind="swapped_minmax",
    split="held_out",
    function="days_left",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        EditOp("swap_minmax", swap_minmax, "fix"),
        replace_op("swap_args", "total - used", "used - total", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
