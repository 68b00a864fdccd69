"""mean: an empty list divides by zero instead of giving 0.0."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

HEADER = "def mean(values):\n"
ISSUE = ("mean(values) should return the average of values, or 0.0 for an empty sequence, "
         "but mean([]) raises ZeroDivisionError instead of returning 0.0.")
BUGGY = HEADER + "    return sum(values) / len(values)\n"
FIXED = HEADER + "    if not values:\n        return 0.0\n    return sum(values) / len(values)\n"
PUBLIC = cases([(([1, 2],), 1.5), (([],), 0.0), (([4],), 4.0)])
HIDDEN = cases([(((),), 0.0), (([-1, 1],), 0.0), (([0.5, 1.5, 1],), 1.0), (((2, 4),), 3.0)], hidden=True)

FAMILY = Family(
    name="mean",
    bug_kind="missed_edge_case",
    split="train",
    function="mean",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("guard_empty", HEADER, HEADER + "    if not values:\n        return 0.0\n", "fix"),
        replace_op("fix_operator", "sum(values) / len(values)", "sum(values) // len(values)", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
