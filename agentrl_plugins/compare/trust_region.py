"""The trust-region probe: a large change at a few tokens of a long trajectory, and whether a recipe's policy loss
clips it.

One trajectory of L policy tokens, all unchanged (ratio 1) except K tokens whose log-prob moved by DELTA, with
one positive advantage. Deterministic, a few seconds on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.recipe import load_recipe


@dataclass(frozen=True)
class ProbeRow:
    """One probe: the recipe, its loss and clip range, the trajectory, and what the loss did with the change."""

    recipe: str
    loss: str
    clip_range: str
    length: int
    changed: int
    delta: float
    clip_fraction: float
    gradient_changed: float
    """|d loss / d logp| at a changed token: 0 when the clip removes the update there."""
    gradient_unchanged: float


def probe(recipe_name: str, length: int, changed: int, delta: float) -> ProbeRow:
    recipe = load_recipe(recipe_name)
    algorithm = RecipeAlgorithm.from_recipe(recipe)
    old = torch.full((1, length), -2.0, dtype=torch.float64)
    logp = old.clone()
    logp[0, :changed] += delta
    logp.requires_grad_()
    result = algorithm.policy_loss(logp, old, torch.tensor([1.0], dtype=torch.float64),
                                   torch.ones(1, length, dtype=torch.float64))
    (gradient,) = torch.autograd.grad(result.per_token_loss.sum(), logp)
    section = recipe.loss
    bounds = f"cap {1 + section.clip_high:g}" if section.policy == "cispo" else f"{section.clip_low:g} / " \
                                                                                   f"{section.clip_high:g}"
    return ProbeRow(recipe_name, section.policy, bounds, length, changed, delta, result.figures()["clip_fraction"],
                    abs(gradient[0, 0].item()), abs(gradient[0, -1].item()))


def probe_rows(recipes: Sequence[str], lengths: Sequence[int] = (100, 1000, 10000), changed: Sequence[int] = (1, 5),
               deltas: Sequence[float] = (0.5, 2.0)) -> list[ProbeRow]:
    return [probe(recipe, length, count, delta) for recipe in recipes for length in lengths for count in changed
            for delta in deltas]


def probe_table(rows: Sequence[ProbeRow]) -> str:
    lines = ["| recipe | loss | clip range | L | changed tokens | log-prob change | clip fraction | gradient at a "
             "changed token | at an unchanged one |", "|" + "---|" * 9]
    lines += [f"| {r.recipe} | {r.loss} | {r.clip_range} | {r.length} | {r.changed} | {r.delta:+g} | "
              f"{r.clip_fraction:.4f} | {r.gradient_changed:.3f} | {r.gradient_unchanged:.3f} |" for r in rows]
    return "\n".join(lines)
