"""midpoint: the two ends are subtracted where they should be added."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("midpoint(a, b) should return the number halfway between a and b, "
         "but midpoint(2, 6) returns -2.0 instead of 4.0.")
BUGGY = "def midpoint(a, b):\n    return (a - b) / 2\n"
FIXED = "def midpoint(a, b):\n    return (a + b) / 2\n"
PUBLIC = cases([((2, 6), 4.0), ((0, 0), 0.0), ((10, 4), 7.0)])
HIDDEN = cases([((-3, 3), 0.0), ((1, 2), 1.5), ((5, 5), 5.0), ((-8, -2), -5.0)], hidden=True)

FAMILY = Family(
    name="midpoint",
    bug_kind="wrong_operator",
    split="train",
    function="midpoint",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("fix_operator", "(a - b)", "(a + b)", "fix"),
        replace_op("swap_args", "(a - b)", "(b - a)", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
