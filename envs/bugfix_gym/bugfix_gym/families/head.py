"""head: the slice ``items[:n - 1]`` returns one item too few."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("head(items, n) should return the first n items, "
         "but head([4, 5, 6], 2) returns [4] instead of [4, 5].")
BUGGY = "def head(items, n):\n    return items[:n - 1]\n"
FIXED = "def head(items, n):\n    return items[:n]\n"
PUBLIC = cases([(([4, 5, 6], 2), [4, 5]), (([1, 2], 5), [1, 2]), (([9, 8, 7], 3), [9, 8, 7])])
HIDDEN = cases([(([], 2), []), (([1, 2, 3], 0), []), (("hello", 3), "hel"), (([7], 1), [7])], hidden=True)

FAMILY = Family(
    name="head",
    bug_kind="off_by_one",
    split="held_out",
    function="head",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("extend_range", "items[:n - 1]", "items[:n]", "fix"),
        replace_op("shrink_range", "items[:n - 1]", "items[:n - 2]", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
