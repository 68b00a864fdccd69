"""``compute_score`` for setups that keep verl's reward loop: ``custom_reward_function.path=pkg://agentrl_verl.reward``.

The agent loop scores its own episodes (``reward_score``), so verl's reward loop
only runs for rows some other agent loop produced. Here the response text is
replayed in a fresh session of the row's task, one line per message, until the
episode ends, and the verifier judges the outcome: exact for environments whose
actions are one line each (the BugFix tool calls) when the response holds them in
order, as a single-turn response does. Verifier names and combination come from
``reward.custom_reward_function.reward_kwargs`` (``verifier_names``, ``combine``).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from agentrl_plugins.recipe_schema import EnvironmentSection

from agentrl_verl.verl_plugin.agent_loop import environment, tasks, verifier
from agentrl_verl.verl_plugin.registration import check_registration

DEFAULT_ENVIRONMENT = "bugfix"


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None,
                  verifier_names: Sequence[str] = ("hidden_tests",), combine: str = "min",
                  **kwargs: Any) -> dict[str, float]:
    """Reward of ``solution_str`` on task ``ground_truth``; ``score`` plus the verdict's flags."""
    info = extra_info or {}
    settings = EnvironmentSection(info.get("environment", DEFAULT_ENVIRONMENT),
                                  options=json.loads(info.get("environment_options") or "{}"))
    session = environment(settings).start(tasks(settings)[ground_truth])
    try:
        for line in solution_str.splitlines():
            if line.strip() and session.step(line).done:
                break
        verdict = verifier(tuple(verifier_names), combine)(session.outcome())
    finally:
        session.close()
    return {"score": verdict.reward, "passed": float(verdict.passed), "hacked": float(verdict.hacked)}


check_registration()
