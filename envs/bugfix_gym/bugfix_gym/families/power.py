"""power: base and exponent trade places in ``**``."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("power(base, exponent) should return base raised to exponent, "
         "but power(2, 3) returns 9 instead of 8.")
BUGGY = "def power(base, exponent):\n    return exponent ** base\n"
FIXED = "def power(base, exponent):\n    return base ** exponent\n"
PUBLIC = cases([((2, 3), 8), ((2, 2), 4), ((5, 1), 5)])
HIDDEN = cases([((3, 4), 81), ((10, 0), 1), ((1, 7), 1), ((-2, 3), -8)], hidden=True)

FAMILY = Family(
    name="power",
    bug_kind="swapped_arguments",
    split="train",
    function="power",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("swap_args", "exponent ** base", "base ** exponent", "fix"),
        replace_op("fix_operator", "exponent ** base", "exponent * base", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
