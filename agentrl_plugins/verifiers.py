"""Building the recipe's verifier: one registered verifier, or several combined."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

from agentrl_plugins.environment import VerifierFn
from agentrl_plugins.types import Verdict

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

COMBINE: dict[str, Callable[[list[float]], float]] = {
    "min": min,
    "mean": lambda rewards: sum(rewards) / len(rewards),
    "product": math.prod,
}


def combine(verifiers: dict[str, VerifierFn], how: str = "min") -> VerifierFn:
    """A verifier whose reward is ``how`` (min, mean, product) of the given verifiers' rewards."""
    if how not in COMBINE:
        raise ValueError(f"unknown combination {how!r}; use one of {sorted(COMBINE)}")
    reduce = COMBINE[how]

    def combined(outcome: Any) -> Verdict:
        verdicts = [verify(outcome) for verify in verifiers.values()]
        flags: dict[str, bool] = {}
        for verdict in verdicts:
            for flag, value in verdict.flags.items():
                flags[flag] = flags.get(flag, False) or value
        return Verdict(
            reward=float(reduce([v.reward for v in verdicts])),
            passed=all(v.passed for v in verdicts),
            tests=verdicts[0].tests,
            flags=flags,
            verifier=f"{how}({', '.join(verifiers)})",
        )

    return combined


def build_verifier(names: Sequence[str], how: str, plugin_manager: PluginManager) -> VerifierFn:
    """The verifier a recipe names, looked up in the registry (unknown names list close matches)."""
    registry = plugin_manager.registry("verifier")
    verifiers = {name: registry.get(name).factory() for name in names}
    return next(iter(verifiers.values())) if len(verifiers) == 1 else combine(verifiers, how)
