"""percent: part and whole trade places in the division."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("percent(part, whole) should return part as a percentage of whole, "
         "but percent(1, 4) returns 400.0 instead of 25.0.")
BUGGY = "def percent(part, whole):\n    return 100 * whole / part\n"
FIXED = "def percent(part, whole):\n    return 100 * part / whole\n"
PUBLIC = cases([((1, 4), 25.0), ((3, 3), 100.0), ((2, 8), 25.0)])
HIDDEN = cases([((0, 5), 0.0), ((5, 2), 250.0), ((1, 8), 12.5), ((7, 7), 100.0)], hidden=True)

FAMILY = Family(
    name="percent",
    bug_kind="swapped_arguments",
    split="held_out",
    function="percent",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("swap_args", "whole / part", "part / whole", "fix"),
        replace_op("fix_operator", "whole / part", "whole // part", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
