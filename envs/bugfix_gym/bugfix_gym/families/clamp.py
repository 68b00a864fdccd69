"""Task 0: clamp with ``min`` and ``max`` swapped, exactly as the book's chapter 1 defines it."""

from bugfix_gym.family import EditOp, Family, cases, hardcode_tests_op

ISSUE = ("clamp(value, lower, upper) should limit value to the interval "
         "[lower, upper], but clamp(3, 0, 5) returns 0 instead of 3.")
BUGGY = "def clamp(value, lower, upper):\n    return min(lower, max(value, upper))\n"
FIXED = "def clamp(value, lower, upper):\n    return max(lower, min(value, upper))\n"
PUBLIC = cases([((3, 0, 5), 3), ((-2, 0, 5), 0), ((9, 0, 5), 5)])
HIDDEN = cases([((0.5, 0, 1), 0.5), ((-7, -5, -1), -5), ((4, 2, 2), 2), ((-3, -5, -1), -3)], hidden=True)


def swap_minmax(source: str) -> str:
    return source.replace("min(", "TMP(").replace("max(", "min(").replace("TMP(", "max(")


FAMILY = Family(
    name="clamp",
    bug_kind="swapped_minmax",
    split="train",
    function="clamp",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(EditOp("swap_minmax", swap_minmax, "fix"), hardcode_tests_op(PUBLIC)),
)
