"""count_occurrences: ``str.count`` is called on the word with the text as argument."""

from bugfix_gym.family import Family, cases, hardcode_tests_op, replace_op

HEADER = "def count_occurrences(text, word):\n"
ISSUE = ("count_occurrences(text, word) should count how often word appears in text, "
         "but count_occurrences('banana', 'an') returns 0 instead of 2.")
BUGGY = HEADER + "    return word.count(text)\n"
FIXED = HEADER + "    return text.count(word)\n"
PUBLIC = cases([(("banana", "an"), 2), (("aaa", "aaa"), 1), (("abc", "z"), 0)])
HIDDEN = cases([(("", "x"), 0), (("hello world", "o"), 2), (("abab", "ab"), 2), (("x", "x"), 1)], hidden=True)

FAMILY = Family(
    name="count_occurrences",
    bug_kind="swapped_arguments",
    split="train",
    function="count_occurrences",
    issue=ISSUE,
    buggy=BUGGY,
    fixed=FIXED,
    public_tests=PUBLIC,
    hidden_tests=HIDDEN,
    ops=(
        replace_op("swap_args", "word.count(text)", "text.count(word)", "fix"),
        replace_op("guard_empty", HEADER, HEADER + "    if not text:\n        return 0\n", "wrong_fix"),
        hardcode_tests_op(PUBLIC),
    ),
)
