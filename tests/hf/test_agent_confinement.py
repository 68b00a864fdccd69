"""Agent programs run confined: each attack a hostile program can make (tests/hf/agent_programs/hostile.py) and
what it gets now: no hidden tests, no trainer environment, no run folder, no sibling's key, nothing left running,
no stalled episode, bounded output; and an episode's key works for that episode alone."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from agent_processes import left_running

from agentrl_plugins import confinement
from agentrl_plugins.agent_command import AgentCommand, AgentCommandTimeout
from agentrl_plugins.environment import AgentLink
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.testing import ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling, Task

import bugfix_gym
from bugfix_gym import verifiers
from bugfix_gym.agent import BugFixAgentGym

HOSTILE = Path(__file__).parent / "agent_programs" / "hostile.py"
GYM_PACKAGE = str(Path(bugfix_gym.__file__).resolve().parent)
TASK = Task("t0", "clamp", "train", "clamp is wrong")
GIVEN = {"OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTRL_MODEL", "AGENTRL_TIMEOUT_S", "PATH", "HOME", "TMPDIR", "LANG",
         "PWD"}


def hostile(*args: str, **options) -> AgentCommand:
    """The hostile program, as the BugFix gym runs a user's command (its own package hidden)."""
    return AgentCommand.parse([sys.executable, str(HOSTILE), *args], hidden=[GYM_PACKAGE], **options)


def link(timeout_s: float = 20.0, key: str = "ep-test", base_url: str = "http://127.0.0.1:9/v1") -> AgentLink:
    return AgentLink(base_url, key, "agentrl", TASK, timeout_s)


@pytest.mark.filterwarnings("ignore::agentrl_plugins.agent_command.UnconfinedAgentWarning")
def test_the_hidden_tests_are_neither_importable_nor_readable():
    assert hostile("hidden", GYM_PACKAGE, confine=False).run(link(), {})["imported"]  # what confinement stops
    got = hostile("hidden", GYM_PACKAGE).run(link(), {})
    assert got == {"imported": False, "readable": []}


def test_the_program_gets_only_what_it_is_given():
    got = hostile("environ").run(link(), {})
    assert set(got["environ"]) <= GIVEN and "OPENAI_API_KEY" in got["environ"]


def test_the_run_folder_is_out_of_sight(tmp_path):
    metrics = tmp_path / "runs" / "r1" / "metrics.jsonl"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("{}\n")
    got = hostile("run-folder", "runs/r1/metrics.jsonl", cwd=str(tmp_path)).run(link(), {})
    assert not got["appended"] and metrics.read_text() == "{}\n"


def test_a_sibling_episode_key_is_neither_seen_nor_usable(tokenizer):
    limits = Limits(max_turns=4, max_context_tokens=1024, max_new_tokens_per_turn=8, timeout_s=20.0)

    async def episodes():
        with Gateway(model_name="agentrl") as gateway:
            sibling = gateway.open_session(ScriptedGenerate(["hi"], tokenizer), tokenizer, limits, Sampling())
            attacker = gateway.open_session(ScriptedGenerate(["hi"], tokenizer), tokenizer, limits, Sampling())
            waiting = asyncio.to_thread(hostile("sleep", "4").run,
                                        link(key=sibling.key, base_url=gateway.base_url), {})
            sleeper = asyncio.ensure_future(waiting)
            await asyncio.sleep(1.0)  # the sibling's program is up, its key in its environment
            got = await asyncio.to_thread(hostile("sibling").run,
                                          link(key=attacker.key, base_url=gateway.base_url), {})
            await sleeper
            return got, sibling.requests

    got, sibling_calls = asyncio.run(episodes())
    assert got == {"keys": 0, "accepted": 0} and sibling_calls == 0


def test_another_episodes_key_is_refused_by_the_gateway(tokenizer):
    limits = Limits(max_turns=4, max_context_tokens=1024, max_new_tokens_per_turn=8, timeout_s=20.0)

    async def call():
        with Gateway(model_name="agentrl") as gateway:
            first = gateway.open_session(ScriptedGenerate(["hi"], tokenizer), tokenizer, limits, Sampling())
            second = gateway.open_session(ScriptedGenerate(["hi"], tokenizer), tokenizer, limits, Sampling())
            body = {"model": "agentrl", "messages": [{"role": "user", "content": "x"}]}
            async with httpx.AsyncClient() as client:
                response = await client.post(f"{gateway.session_url(first.key)}/chat/completions", json=body,
                                              headers={"Authorization": f"Bearer {second.key}"})
            return response, first, second

    response, first, second = asyncio.run(call())
    assert response.status_code == 403 and response.json()["error"]["code"] == "session_mismatch"
    assert first.requests == second.requests == 0
    assert len(first.key) >= 40 and first.key != second.key  # 256 random bits each


def test_a_setsid_child_that_ignores_signals_ends_with_the_episode():
    marker = f"agentrl-setsid-{uuid.uuid4().hex}"
    assert hostile("setsid", marker).run(link(), {}) == {}
    assert left_running(marker) == []


@pytest.mark.filterwarnings("ignore::agentrl_plugins.agent_command.UnconfinedAgentWarning")
@pytest.mark.parametrize("confine", [True, False], ids=["confined", "unconfined"])
def test_a_child_holding_stdout_does_not_turn_a_finished_program_into_a_timeout(confine):
    marker = f"agentrl-hold-{uuid.uuid4().hex}"
    started = time.monotonic()
    try:
        assert hostile("hold-stdout", marker, confine=confine).run(link(timeout_s=8.0), {}) == {}
    except AgentCommandTimeout:
        pytest.fail("a finished program was held to its time budget")
    finally:
        alive = left_running(marker)
    assert time.monotonic() - started < 5 and alive == []


def test_a_hung_program_that_ignores_sigterm_is_killed_at_its_budget():
    started = time.monotonic()
    with pytest.raises(AgentCommandTimeout, match="did not finish within 2 s"):
        hostile("sleep", "600").run(link(timeout_s=2.0), {})
    assert time.monotonic() - started < 4


def test_a_flood_of_stdout_is_cut_and_said_and_the_trainer_memory_bounded(tokenizer):
    gym = BugFixAgentGym(command=[sys.executable, str(HOSTILE), "flood", "256"])
    task = gym.tasks("train")[0]
    limits = Limits(max_turns=4, max_context_tokens=1024, max_new_tokens_per_turn=32, timeout_s=60.0)
    peak, stop = [_rss()], threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(peak, stop))

    async def episode():
        with Gateway() as gateway:
            return await play_agent_program(gateway, gym, task, ScriptedGenerate(["hi"], tokenizer), tokenizer,
                                            limits, Sampling(), verifier=verifiers.hidden_tests)

    sampler.start()
    try:
        trajectory = asyncio.run(episode())
    finally:
        stop.set()
        sampler.join()
        gym.close()
    assert trajectory.termination == "submitted"
    notes = [message["content"] for message in trajectory.messages if message["role"] == "note"]
    assert len(notes) == 1 and re.search(r"printed (\d+) bytes on stdout: the first (\d+) were cut", notes[0])
    printed, cut = map(int, re.search(r"printed (\d+) .* first (\d+)", notes[0]).groups())
    assert printed > 256 << 20 and printed - cut == 4 << 20
    assert max(peak) - peak[0] < 64 << 20


def _rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sample_rss(peak: list[int], stop: threading.Event) -> None:
    while not stop.wait(0.005):
        peak.append(_rss())


def test_without_bubblewrap_a_confined_program_is_a_clear_error_and_unconfined_a_loud_warning(monkeypatch):
    def missing() -> str:
        raise confinement.ConfinementUnavailable("bubblewrap is not installed (no bwrap on PATH)")

    monkeypatch.setattr(confinement, "check", missing)
    with pytest.raises(Exception, match="cannot run here: bubblewrap is not installed.*confine = false"):
        BugFixAgentGym(command=[sys.executable, str(HOSTILE), "environ"])
    monkeypatch.setattr("agentrl_plugins.agent_command._warned", False)
    with pytest.warns(UserWarning, match="UNCONFINED"):
        hostile("environ", confine=False).check()
