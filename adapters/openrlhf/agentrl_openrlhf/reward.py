"""OpenRLHF's single-turn reward file: a completion is played as the policy's messages, the recipe's verifier scores it.

For ``--reward.remote_url`` without an agent executor, on the dataset of ``agentrl openrlhf dataset``
with ``--data.input_key messages --data.apply_chat_template``. Each non-empty line of the completion
is one policy message, played in order until the episode ends or ``rollout.max_turns`` messages
(a BugFix completion such as ``<tool>edit swap_minmax</tool>`` then ``<tool>submit</tool>``).
The completion is the query after its prompt; OpenRLHF decodes it with special tokens kept, so
chat markers of the ``<|...|>`` form (Qwen, Llama 3, the core's byte-level chat tokenizer) are removed first.
``label`` is the task id.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

import torch

from agentrl_plugins.environment import EnvironmentSuite, VerifierFn, build_environment
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.types import Task, Verdict
from agentrl_plugins.verifiers import build_verifier

from agentrl_openrlhf.recipe_env import recipe_from_env

CHAT_MARKER = re.compile(r"<\|[^|<>]*\|>")


@dataclass(frozen=True)
class SingleTurnJudge:
    """The recipe's environment, tasks, verifier and turn budget."""

    env: EnvironmentSuite
    tasks: dict[str, Task]
    verifier: VerifierFn
    max_turns: int

    def __call__(self, completion: str, task_id: str) -> Verdict:
        session = self.env.start(self.tasks[task_id])
        try:
            messages = [line for line in CHAT_MARKER.sub("", completion).splitlines() if line.strip()]
            for message in messages[: self.max_turns]:
                if session.step(message).done:
                    break
            return self.verifier(session.outcome())
        finally:
            session.close()


@functools.lru_cache(maxsize=1)
def judge() -> Callable[[str, str], Verdict]:
    """The judge for ``AGENTRL_OPENRLHF_RECIPE``, built once per process."""
    recipe = recipe_from_env()
    manager = get_plugin_manager()
    env = build_environment(recipe.environment, manager)
    return SingleTurnJudge(env, {task.id: task for task in env.tasks()},
                           build_verifier(recipe.verifier.names, recipe.verifier.combine, manager),
                           recipe.rollout.max_turns)


def completion_of(query: str, prompt: str) -> str:
    """The generated part of OpenRLHF's decoded ``prompt + completion``."""
    if not query.startswith(prompt):
        raise ValueError("the query does not start with its prompt; cannot tell the completion apart")
    return query[len(prompt):]


def reward_func(queries: list[str], prompts: list[str], labels: list[str], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's ``reward_func``: rewards and scores from the recipe's verifier, and the hacked flag."""
    verdicts = [judge()(completion_of(query, prompt), label) for query, prompt, label in zip(queries, prompts, labels)]
    rewards = torch.tensor([verdict.reward for verdict in verdicts], dtype=torch.float32)
    hacked = torch.tensor([float(verdict.hacked) for verdict in verdicts])
    return {"rewards": rewards, "scores": rewards.clone(), "extra_logs": {"hacked": hacked}}
