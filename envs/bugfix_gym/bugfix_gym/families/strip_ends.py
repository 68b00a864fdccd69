"""strip_ends: the slice keeps the last item it should drop."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

ISSUE = ("strip_ends(items) should drop the first and the last item, "
         "but strip_ends([1, 2, 3, 4]) returns [2, 3, 4] instead of [2, 3].")
BUGGY = "def strip_ends(items):\n    return items[1:len(items)]\n"
FIXED = "def strip_ends(items):\n    return items[1:len(items) - 1]\n"
PUBLIC = cases([(([1, 2, 3, 4],), [2, 3]), (([5],), []), (("abc",), "b")])
HIDDEN = cases([(([],), []), (([1, 2],), []), (([9, 8, 7, 6, 5],), [8, 7, 6]), (("xyzw",), "yz")], hidden=True)

FAMILY = Family(
    name="strip_ends",
    bug_kind="off_by_one",
    split="train",
    function="strip_ends",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("shrink_range", "items[1:len(items)]", "items[1:len(items) - 1]", "fix"),
        replace_op("extend_range", "items[1:len(items)]", "items[0:len(items)]", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
