"""count_up: ``range(1, n)`` stops one short of n."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("count_up(n) should return the integers 1 through n, "
         "but count_up(3) returns [1, 2] instead of [1, 2, 3].")
BUGGY = "def count_up(n):\n    return list(range(1, n))\n"
FIXED = "def count_up(n):\n    return list(range(1, n + 1))\n"
PUBLIC = cases([((3,), [1, 2, 3]), ((1,), [1]), ((0,), [])])
HIDDEN = cases([((5,), [1, 2, 3, 4, 5]), ((2,), [1, 2]), ((-1,), [])], hidden=True)

FAMILY = Family(
    name="count_up",
    bug_kind="off_by_one",
    split="train",
    function="count_up",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("extend_range", "range(1, n)", "range(1, n + 1)", "fix"),
        replace_op("shrink_range", "range(1, n)", "range(1, n - 1)", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
