"""OpenRLHF's prompt dataset for a recipe: JSON lines with the task's prompt, its chat messages, id and family.

``--data.input_key prompt --data.label_key label``: the agent executor plays the task named by
the label (the prompt text is only echoed; OpenRLHF's evaluation groups samples by it, and by
``datasource``, the task's family). Single-turn runs take ``--data.input_key messages
--data.apply_chat_template``: the system prompt and the task, as the episode runner's first turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl_plugins.environment import EnvironmentSuite
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.types import Task


def prompt_row(env: EnvironmentSuite, task: Task) -> dict[str, Any]:
    session = env.start(task)
    try:
        prompt = session.prompt
    finally:
        session.close()
    messages = [{"role": "system", "content": env.system_prompt}, {"role": "user", "content": prompt}]
    return {"prompt": prompt, "messages": messages, "label": task.id, "datasource": task.family}


def dataset_rows(env: EnvironmentSuite, recipe: Recipe, split: str) -> list[dict[str, Any]]:
    """The training split cycled to ``train.steps x rollout.tasks_per_step`` rows; any other split once."""
    tasks = list(env.tasks(split))
    if split == recipe.environment.train_split:
        count = recipe.train.steps * recipe.rollout.tasks_per_step
        tasks = [tasks[i % len(tasks)] for i in range(count)]
    return [prompt_row(env, task) for task in tasks]


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
