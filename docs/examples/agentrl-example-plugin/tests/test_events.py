"""The event hooks: a line per episode and per step in the file ``AGENTRL_EXAMPLE_EVENTS`` names."""

import asyncio
import json

from agentrl_plugins.episode import run_episodes
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits

from agentrl_example_plugin.events import EVENTS_VARIABLE
from agentrl_example_plugin.verifier import exact_answer


def test_each_episode_and_step_appends_one_line(manager, tmp_path, monkeypatch):
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv(EVENTS_VARIABLE, str(events))
    env = manager.get("environment", "arithmetic").factory()
    tokenizer = ByteChatTokenizer()
    asyncio.run(run_episodes(env, env.tasks("train")[:1], ScriptedGenerate(["answer 84"], tokenizer), tokenizer,
                             Limits(max_turns=2), group_size=2, verifier=exact_answer, hooks=manager.hook))
    manager.hook.agentrl_step_end(step=1, metrics={"train_reward": 1.0})
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [(line["event"], line.get("reward"), line.get("step")) for line in lines] == [
        ("episode", 1.0, None), ("episode", 1.0, None), ("step", None, 1)]


def test_nothing_is_written_without_the_variable(manager, tmp_path, monkeypatch):
    monkeypatch.delenv(EVENTS_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    manager.hook.agentrl_step_end(step=1, metrics={"train_reward": 1.0})
    assert list(tmp_path.iterdir()) == []
