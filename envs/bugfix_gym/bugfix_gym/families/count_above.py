"""count_above: the filter keeps values below the threshold instead of above it."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("count_above(values, threshold) should count the values strictly greater than threshold, "
         "but count_above([1, 5, 7], 4) returns 1 instead of 2.")
BUGGY = "def count_above(values, threshold):\n    return sum(1 for v in values if v < threshold)\n"
FIXED = "def count_above(values, threshold):\n    return sum(1 for v in values if v > threshold)\n"
PUBLIC = cases([(([1, 5, 7], 4), 2), (([4, 4], 4), 0), (([10, 20, 30], 0), 3)])
HIDDEN = cases(
    [(([3, 3, 9], 3), 1), (([-5, -1], -3), 1), (([2.5, 1.5], 2), 1), (([1, 2, 3, 4, 5], 2), 3)], hidden=True
)

FAMILY = Family(
    name="count_above",
    bug_kind="inverted_comparison",
    split="train",
    function="count_above",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("flip_comparison", "v < threshold", "v > threshold", "fix"),
        replace_op("extend_range", "v < threshold", "v <= threshold", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
