"""``compute_score`` for setups that keep verl's reward loop: ``custom_reward_function.path=pkg://agentrl_verl.reward``.

The agent loop scores its own episodes (``reward_score``), so verl's reward loop
only runs for rows some other agent loop produced. Here the response text is
replayed in a fresh session of the row's task, one line per message, until the
episode ends, and the verifier judges the outcome: exact for environments whose
actions are one line each (the BugFix tool calls) when the response holds them in
order, as a single-turn response does. The verifier is the recipe's: the run folder's
``recipe.toml`` that ``reward.custom_reward_function.reward_kwargs.recipe`` names (the
launcher sets it); the row's environment and options come from its ``extra_info``. verl's reward workers load this
module at start-up whether or not they score anything, so the agent loops and the registration check it needs are
imported on the first score.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from agentrl_plugins.recipe_schema import EnvironmentSection
from agentrl_plugins.runs.rundir import read_recipe_file

from agentrl_verl.recipe_file import checked_path


@functools.cache
def registered() -> None:
    """Check once per process that verl has agentrl's names (:func:`check_registration`)."""
    from agentrl_verl.registration import check_registration

    check_registration()


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None,
                  recipe: str | None = None, **kwargs: Any) -> dict[str, float]:
    """Reward of ``solution_str`` on task ``ground_truth``; ``score`` plus the verdict's flags."""
    from agentrl_verl.verl_plugin.agent_loop import episode_service

    registered()
    path = checked_path(recipe, "reward.custom_reward_function.reward_kwargs.recipe")
    info = extra_info or {}
    named = read_recipe_file(path).environment
    settings = EnvironmentSection(info["environment"], options=json.loads(info.get("environment_options") or "{}")) \
        if "environment" in info else named
    service = episode_service(path, settings)
    session = service.env.start(service.task(ground_truth))
    try:
        for line in solution_str.splitlines():
            if line.strip() and session.step(line).done:
                break
        verdict = service.verifier(session.outcome())
    finally:
        session.close()
    return {"score": verdict.reward, "passed": float(verdict.passed), "hacked": float(verdict.hacked)}
