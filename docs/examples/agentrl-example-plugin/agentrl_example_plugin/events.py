"""Event hooks: with ``AGENTRL_EXAMPLE_EVENTS`` naming a file, one JSON line per finished episode and per
training step, from whichever process the framework plays or trains in (nothing when it is unset)."""

import json
import os

from agentrl_plugins import hookimpl

EVENTS_VARIABLE = "AGENTRL_EXAMPLE_EVENTS"


def append_event(event: dict) -> None:
    """One line, appended in one write, so that lines from concurrent processes never interleave."""
    path = os.environ.get(EVENTS_VARIABLE)
    if path:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(descriptor, (json.dumps(event) + "\n").encode())
        finally:
            os.close(descriptor)


@hookimpl
def agentrl_episode_end(trajectory):
    append_event({"event": "episode", "task": trajectory.task_id, "split": trajectory.split,
                  "reward": trajectory.reward, "pid": os.getpid()})


@hookimpl
def agentrl_step_end(step, metrics):
    append_event({"event": "step", "step": step, "train_reward": metrics["train_reward"], "pid": os.getpid()})
