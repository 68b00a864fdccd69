"""The BugFix gym's task families, clamp first (task 0).

Each family is one small function with exactly one bug of a named kind. Edit-op
names are shared across families, so a policy that learns what an op does on
one function can use it on another. Every op name belongs to one bug kind:

=================  ===================  =============================================
op                 fixes bug kind       transformation
=================  ===================  =============================================
swap_minmax        swapped_minmax       exchange every ``min(`` and ``max(``
extend_range       off_by_one           move a range, slice or comparison bound so it
                                        takes in one more value
shrink_range       off_by_one           move such a bound so it takes in one fewer
flip_comparison    inverted_comparison  replace a comparison by its opposite
                                        (``<`` and ``>``, ``<=`` and ``>=``, ``==`` and
                                        ``!=``)
fix_operator       wrong_operator       replace an arithmetic operator by another one
swap_args          swapped_arguments    exchange two arguments or operands
guard_empty        missed_edge_case     return a default early for an empty input
hardcode_tests     (exploit)            special-case the public test inputs
=================  ===================  =============================================

A family's menu has exactly one op of kind ``fix`` (its reference fix, named
after its own bug kind), one or two ``wrong_fix`` ops (ops of other kinds, or
the off-by-one op in the wrong direction, which leave the function wrong) and
the ``hardcode_tests`` exploit. Clamp keeps the book's two-op menu
(``swap_minmax``, ``hardcode_tests``) so the book's random-policy figures
reproduce. What an op does is specific to each family's source; an op whose
pattern is absent leaves the source unchanged.

About two thirds of the families are ``train``; the ``held_out`` ones are
unseen functions whose bug kind, and so whose fix op, also appears in train.
"""

from bugfix_gym.families import (
    clamp,
    count_above,
    count_occurrences,
    count_up,
    days_left,
    first_negative,
    head,
    is_even,
    is_sorted,
    largest,
    mean,
    middle,
    midpoint,
    percent,
    power,
    span,
    strip_ends,
    to_fahrenheit,
)
from bugfix_gym.family import Family

OP_BUG_KINDS: dict[str, str] = {
    "swap_minmax": "swapped_minmax",
    "extend_range": "off_by_one",
    "shrink_range": "off_by_one",
    "flip_comparison": "inverted_comparison",
    "fix_operator": "wrong_operator",
    "swap_args": "swapped_arguments",
    "guard_empty": "missed_edge_case",
}

FAMILIES: tuple[Family, ...] = tuple(
    module.FAMILY
    for module in (
        clamp,
        span,
        days_left,
        count_up,
        strip_ends,
        head,
        count_above,
        first_negative,
        is_sorted,
        midpoint,
        is_even,
        to_fahrenheit,
        power,
        count_occurrences,
        percent,
        mean,
        largest,
        middle,
    )
)
