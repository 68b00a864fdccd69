"""The trust-region probe of the book's objectives experiment: a large change at a few tokens of a long trajectory,
and whether each policy loss's clip activates.

One trajectory of L policy tokens, all unchanged (ratio 1) except K tokens whose log-prob moved by DELTA; one
positive advantage. For each built-in policy loss, with its shipped recipe's clip range (``ppo_clip`` from
``deepswe_grpopp``, ``gspo`` and ``cispo`` from theirs), it prints the share of tokens the clip limits and the
gradient's size at a changed and at an unchanged token (0: the update there is clipped away). Deterministic (no
sampling); a few seconds on a CPU.

    python benchmarks/trust_region_probe.py [--lengths 100 1000 10000] [--changed 1 5] [--deltas 0.5 2.0]
"""

from __future__ import annotations

import argparse

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.recipe import load_recipe

LOSSES = {"ppo_clip": "deepswe_grpopp", "gspo": "gspo", "cispo": "cispo"}


def probe(recipe_name: str, length: int, changed: int, delta: float) -> tuple[float, float, float]:
    """The clip fraction over the trajectory, and |d loss / d logp| at a changed and at an unchanged token."""
    algorithm = RecipeAlgorithm.from_recipe(load_recipe(recipe_name))
    old = torch.full((1, length), -2.0, dtype=torch.float64)
    logp = old.clone()
    logp[0, :changed] += delta
    logp.requires_grad_()
    result = algorithm.policy_loss(logp, old, torch.tensor([1.0], dtype=torch.float64),
                                   torch.ones(1, length, dtype=torch.float64))
    (gradient,) = torch.autograd.grad(result.per_token_loss.sum(), logp)
    return result.metrics["clip_fraction"], abs(gradient[0, 0].item()), abs(gradient[0, -1].item())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--changed", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.5, 2.0])
    args = parser.parse_args()
    print("| loss | clip range | L | changed tokens | log-prob change | clip fraction | gradient at a changed token "
          "| at an unchanged one |")
    print("|---|---|---|---|---|---|---|---|")
    for loss, recipe_name in LOSSES.items():
        section = load_recipe(recipe_name).loss
        bounds = (f"cap {1 + section.clip_high:g}" if loss == "cispo"
                  else f"{section.clip_low:g} / {section.clip_high:g}")
        for length in args.lengths:
            for changed in args.changed:
                for delta in args.deltas:
                    fraction, at_changed, at_unchanged = probe(recipe_name, length, changed, delta)
                    print(f"| {loss} | {bounds} | {length} | {changed} | {delta:+g} | {fraction:.4f} | "
                          f"{at_changed:.3f} | {at_unchanged:.3f} |")


if __name__ == "__main__":
    main()
