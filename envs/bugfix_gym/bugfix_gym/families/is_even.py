"""is_even: floor division ``//`` is used where the remainder ``%`` is meant."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("is_even(n) should say whether the integer n is even, "
         "but is_even(4) returns False instead of True.")
BUGGY = "def is_even(n):\n    return n // 2 == 0\n"
FIXED = "def is_even(n):\n    return n % 2 == 0\n"
PUBLIC = cases([((4,), True), ((0,), True), ((7,), False)])
HIDDEN = cases([((1,), False), ((10,), True), ((-3,), False), ((-2,), True)], hidden=True)

FAMILY = Family(
    name="is_even",
    bug_kind="wrong_operator",
    split="train",
    function="is_even",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("fix_operator", "n // 2", "n % 2", "fix"),
        replace_op("flip_comparison", "== 0", "!= 0", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
