"""The trust-region probe of the book's objectives experiment (:mod:`agentrl_plugins.compare.trust_region`): a large
change at a few tokens of a long trajectory, and whether each policy loss's clip activates.

For each built-in policy loss, with its shipped recipe's clip range (``ppo_clip`` from ``deepswe_grpopp``, ``gspo``
and ``cispo`` from theirs), it prints the share of tokens the clip limits and the gradient's size at a changed and
at an unchanged token (0: the update there is clipped away). ``agentrl experiment objectives`` puts the same table
in its report, for its own arms.

    python benchmarks/trust_region_probe.py [--lengths 100 1000 10000] [--changed 1 5] [--deltas 0.5 2.0]
"""

from __future__ import annotations

import argparse

from agentrl_plugins.compare.trust_region import probe_rows, probe_table

RECIPES = ("deepswe_grpopp", "gspo", "cispo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--changed", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.5, 2.0])
    args = parser.parse_args()
    print(probe_table(probe_rows(RECIPES, args.lengths, args.changed, args.deltas)))


if __name__ == "__main__":
    main()
