"""The gateway through the real ``openai`` client: the API, token stitching, and every fault an agent program can
bring (malformed requests, unknown and finished sessions, limits, programs that raise, hang or never call)."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from typing import Any

import openai
import pytest

from agentrl_plugins.chat import template_ids
from agentrl_plugins.environment import AgentLink
from agentrl_plugins.gateway import EPISODE_END_HEADER, Gateway, play_agent_program
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.testing import ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling, Task, Verdict

LIMITS = Limits(max_turns=4, max_context_tokens=512, max_new_tokens_per_turn=8, timeout_s=30.0)
TASK = Task("t0", "toy", "train", "say something")


def judge(outcome: Any) -> Verdict:
    """Reward 1 when the program's outcome is the string ``"ok"``."""
    return Verdict(float(outcome == "ok"), outcome == "ok", verifier="toy")


class Program:
    """An agent suite whose program is ``body(client, link)``: a stand-in for a user's agent loop."""

    def __init__(self, body):
        self.body = body

    def tasks(self, split=None):
        return [TASK]

    def run_agent(self, link: AgentLink) -> Any:
        client = openai.OpenAI(base_url=link.base_url, api_key=link.api_key, max_retries=0, timeout=30)
        return self.body(client, link)


def chat(client: openai.OpenAI, link: AgentLink, messages: list[dict[str, str]], **options: Any) -> str:
    reply = client.chat.completions.create(model=link.model, messages=messages, **options)
    return reply.choices[0].message.content or ""


@pytest.fixture
def sampler(random_model, tokenizer):
    return HFGenerator(random_model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=0)


@pytest.fixture
def gateway():
    with Gateway() as running:
        yield running


def play(gateway, program, generate, tokenizer, limits=LIMITS, task=TASK):
    return asyncio.run(play_agent_program(gateway, program, task, generate, tokenizer, limits, Sampling(),
                                          verifier=judge))


def test_a_conversation_is_stitched_onto_the_sampled_tokens_never_re_rendered(gateway, sampler, tokenizer):
    replies: list[str] = []

    def body(client, link):
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
        for turn in range(3):
            replies.append(chat(client, link, messages))
            messages += [{"role": "assistant", "content": replies[-1]}, {"role": "user", "content": f"again {turn}"}]
        return "ok"

    trajectory = play(gateway, Program(body), sampler, tokenizer)
    assert trajectory.termination == "submitted" and trajectory.reward == 1.0 and not trajectory.segments
    assert trajectory.prompt_ids == template_ids(tokenizer, [{"role": "system", "content": "be brief"},
                                                             {"role": "user", "content": "hi"}], True)
    assert len(trajectory.turn_spans) == 3
    policy = [trajectory.response_ids[a:b] for a, b in trajectory.turn_spans]
    assert [tokenizer.decode(ids, skip_special_tokens=True) for ids in policy] == replies
    assert all(len(ids) <= LIMITS.max_new_tokens_per_turn for ids in policy)
    assert [bool(m) for m in trajectory.response_mask] == [
        any(a <= i < b for a, b in trajectory.turn_spans) for i in range(len(trajectory.response_ids))]
    assert all(lp < 0 for lp, m in zip(trajectory.logprobs, trajectory.response_mask) if m)
    # A random model's bytes do not survive decoding and encoding again: rendering the conversation anew would
    # have trained on other tokens than the sampler saw.
    rendered = template_ids(tokenizer, [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                                        {"role": "assistant", "content": replies[0]}], False)
    sampled = trajectory.prompt_ids + trajectory.response_ids[:trajectory.turn_spans[0][1]]
    assert rendered[:len(sampled)] != sampled


def test_an_edited_history_starts_a_new_segment_and_counts_as_drift(gateway, tokenizer):
    generate = ScriptedGenerate(["first", "second", "third"], tokenizer)

    def body(client, link):
        messages = [{"role": "user", "content": "task"}]
        one = chat(client, link, messages)
        two = chat(client, link, messages + [{"role": "assistant", "content": one}, {"role": "user", "content": "o"}])
        summary = [{"role": "user", "content": f"task (so far: {one}, {two})"}]  # the agent summarised its history
        chat(client, link, summary)
        return "ok"

    trajectory = play(gateway, Program(body), generate, tokenizer)
    assert len(trajectory.segments) == 1 and trajectory.reward == trajectory.segments[0].reward == 1.0
    assert len(trajectory.turn_spans) == 2 and len(trajectory.segments[0].turn_spans) == 1
    later = trajectory.segments[0]
    assert later.prompt_ids == generate.prompts[2]
    assert later.prompt_ids == template_ids(tokenizer, [{"role": "user", "content": "task (so far: first, second)"}],
                                            True)
    assert trajectory.prompt_ids + trajectory.response_ids[:trajectory.turn_spans[1][0]] == generate.prompts[1]


def test_streaming_logprobs_and_models_through_the_openai_client(gateway, sampler, tokenizer):
    seen: dict[str, Any] = {}

    def body(client, link):
        seen["models"] = [model.id for model in client.models.list()]
        stream = client.chat.completions.create(model=link.model, messages=[{"role": "user", "content": "hi"}],
                                                stream=True, logprobs=True)
        chunks = list(stream)
        seen["text"] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        seen["finish"] = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        seen["logprobs"] = [t.logprob for c in chunks if c.choices and c.choices[0].logprobs
                            for t in c.choices[0].logprobs.content]
        return "ok"

    trajectory = play(gateway, Program(body), sampler, tokenizer)
    assert seen["models"] == ["agentrl"]
    assert seen["text"] == tokenizer.decode(trajectory.response_ids, skip_special_tokens=True)
    assert seen["logprobs"] == pytest.approx(trajectory.logprobs, abs=0)
    assert seen["finish"] in ("stop", "length")


def test_the_session_key_travels_in_the_api_key_a_header_or_the_url(gateway, tokenizer):
    async def main():
        outcomes = []
        for carrier in ("api_key", "header", "url"):
            generate = ScriptedGenerate(["hello"], tokenizer)
            session = gateway.open_session(generate, tokenizer, LIMITS, Sampling())
            base, key, headers = gateway.base_url, "unused", {}
            if carrier == "api_key":
                key = session.key
            elif carrier == "header":
                headers = {"X-Agentrl-Session": session.key}
            else:
                base = gateway.session_url(session.key)
            client = openai.OpenAI(base_url=base, api_key=key, default_headers=headers, max_retries=0)
            text = await asyncio.to_thread(chat, client, AgentLink(base, key, "agentrl", TASK, 30),
                                           [{"role": "user", "content": "x"}])
            outcomes.append((text, session.calls))
            gateway.close_session(session.key)
        return outcomes

    assert asyncio.run(main()) == [("hello", 1)] * 3


def post(url: str, body: bytes, key: str = "k") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Authorization": f"Bearer {key}",
                                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.mark.parametrize("body, status, param", [
    (b"{not json", 400, None),
    (b"[1, 2]", 400, None),
    (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), 400, "model"),
    (json.dumps({"model": "agentrl", "messages": []}).encode(), 400, "messages"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "robot", "content": "x"}]}).encode(), 400,
     "messages[0].role"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "user", "content": 3}]}).encode(), 400,
     "messages[0].content"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "user", "content": "x"}], "n": 2}).encode(), 400, "n"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}).encode(),
     400, "max_tokens"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "user", "content": "x"}],
                 "tools": [{"type": "function"}]}).encode(), 400, "tools"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "tool", "content": "x"}]}).encode(), 400,
     "messages[0].tool_call_id"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "user", "content": "x", "tool_calls": [{}]}]}).encode(),
     400, "messages[0].tool_calls"),
    (json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}).encode(), 404, "model"),
    (json.dumps({"model": "agentrl", "messages": [{"role": "user", "content": "x"}]}).encode(), 404, None),
])
def test_malformed_requests_get_openai_style_errors(gateway, body, status, param):
    code, answer = post(gateway.base_url + "/chat/completions", body, key="no-such-session")
    assert code == status
    assert set(answer["error"]) == {"message", "type", "param", "code"} and answer["error"]["message"]
    assert answer["error"]["param"] == param


def test_a_finished_session_is_refused_with_its_termination(gateway, tokenizer):
    async def main():
        session = gateway.open_session(ScriptedGenerate(["a"], tokenizer), tokenizer, LIMITS, Sampling())
        gateway.close_session(session.key)
        client = openai.OpenAI(base_url=gateway.base_url, api_key=session.key, max_retries=0)
        with pytest.raises(openai.ConflictError) as raised:
            await asyncio.to_thread(chat, client, AgentLink("", "", "agentrl", TASK, 30),
                                    [{"role": "user", "content": "x"}])
        return raised.value

    error = asyncio.run(main())
    assert error.code == "episode_ended" and error.response.headers[EPISODE_END_HEADER] == "closed"


def looping(client, link):
    """Calls the model until the gateway ends the episode, then returns ``"ok"`` (as a careful agent does)."""
    messages = [{"role": "user", "content": "go"}]
    while True:
        try:
            reply = chat(client, link, messages)
        except openai.APIStatusError as error:
            assert EPISODE_END_HEADER in error.response.headers, error
            return "ok"
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "observation " * 8}]


def test_limits_end_the_episode_as_the_episode_runner_would(gateway, tokenizer):
    turns = play(gateway, Program(looping), ScriptedGenerate(["x"], tokenizer), tokenizer)
    assert turns.termination == "max_turns" and turns.num_turns == LIMITS.max_turns and turns.reward == 1.0
    tight = Limits(max_turns=20, max_context_tokens=60, max_new_tokens_per_turn=8, timeout_s=30)
    context = play(gateway, Program(looping), ScriptedGenerate(["x"], tokenizer), tokenizer, tight)
    assert context.termination == "max_context" and len(context.token_ids) <= 60


def test_a_program_that_raises_hangs_or_never_calls_ends_its_episode_and_the_next_one_runs(gateway, tokenizer,
                                                                                         monkeypatch):
    def raises(client, link):
        chat(client, link, [{"role": "user", "content": "x"}])
        raise RuntimeError("the agent's own bug")

    release = threading.Event()

    def hangs(client, link):
        chat(client, link, [{"role": "user", "content": "x"}])
        release.wait(60)
        return "ok"

    def silent(client, link):
        return "ok"

    monkeypatch.setattr("agentrl_plugins.gateway.program.GRACE_S", 0.5)
    short = Limits(max_turns=4, max_context_tokens=512, max_new_tokens_per_turn=8, timeout_s=3.0)  # slow machines too
    raised = play(gateway, Program(raises), ScriptedGenerate(["a"], tokenizer), tokenizer)
    hung = play(gateway, Program(hangs), ScriptedGenerate(["a"], tokenizer), tokenizer, short)
    never = play(gateway, Program(silent), ScriptedGenerate(["a"], tokenizer), tokenizer)
    fine = play(gateway, Program(looping), ScriptedGenerate(["a"], tokenizer), tokenizer)
    release.set()
    assert (raised.termination, raised.reward, raised.num_turns) == ("error", 0.0, 1)
    assert "the agent's own bug" in raised.messages[-1]["content"]
    assert (hung.termination, hung.reward, hung.num_turns) == ("timeout", 0.0, 1)
    assert (never.termination, never.reward, never.token_ids) == ("error", 0.0, [])
    assert "never called the model" in never.messages[-1]["content"]
    assert (fine.termination, fine.reward) == ("max_turns", 1.0)
    assert not gateway.sessions


def test_64_concurrent_agent_programs_each_get_their_own_episode(gateway, sampler, tokenizer):
    tasks = [Task(f"t{i}", "toy", "train", f"task {i}") for i in range(64)]

    def body(client, link):
        messages = [{"role": "user", "content": link.task.issue}]
        for _ in range(2):
            messages += [{"role": "assistant", "content": chat(client, link, messages)},
                         {"role": "user", "content": "next"}]
        return "ok"

    async def main():
        return await asyncio.gather(*(play_agent_program(gateway, Program(body), task, sampler, tokenizer, LIMITS,
                                                         Sampling(), verifier=judge) for task in tasks))

    trajectories = asyncio.run(main())
    assert [t.task_id for t in trajectories] == [task.id for task in tasks]
    assert all(t.termination == "submitted" and t.num_turns == 2 and not t.segments for t in trajectories)
    for task, trajectory in zip(tasks, trajectories):
        assert trajectory.prompt_ids == template_ids(tokenizer, [{"role": "user", "content": task.issue}], True)
    assert sampler.batches < 64 * 2 / 4  # the 128 calls of 64 programs shared batched forward passes


TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read the function's source.",
                                           "parameters": {"type": "object", "properties": {}}}},
         {"type": "function", "function": {"name": "edit", "description": "Apply an edit.",
                                           "parameters": {"type": "object", "properties": {"op": {"type": "string"}}}}}]


def test_openai_tool_calls_round_trip_and_stay_on_the_sampled_tokens(gateway):
    """A model whose template shows tools writes Hermes-style calls; the agent gets OpenAI ``tool_calls``, answers
    with ``tool`` messages, and the episode stays one segment on the tokens the sampler produced."""
    from agentrl_plugins.local_models import byte_chat_tokenizer

    tokenizer = byte_chat_tokenizer(tools=True)
    replies = ['<tool_call>{"name": "read", "arguments": {}}</tool_call>',
               'Now the fix. <tool_call>{"name": "edit", "arguments": {"op": "swap"}}</tool_call>', "done"]
    generate = ScriptedGenerate(replies, tokenizer)
    seen: list[Any] = []

    def body(client, link):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
        while True:
            reply = client.chat.completions.create(model=link.model, messages=messages, tools=TOOLS)
            choice = reply.choices[0]
            calls = choice.message.tool_calls or []
            seen.append((choice.finish_reason, choice.message.content,
                         [(c.function.name, json.loads(c.function.arguments)) for c in calls]))
            if not choice.message.tool_calls:
                return "ok"
            messages.append(choice.message.model_dump(exclude_none=True))
            messages += [{"role": "tool", "tool_call_id": call.id, "content": f"result of {call.function.name}"}
                         for call in choice.message.tool_calls]

    limits = Limits(max_turns=4, max_context_tokens=2048, max_new_tokens_per_turn=128, timeout_s=30.0)
    trajectory = play(gateway, Program(body), generate, tokenizer, limits)
    assert seen == [("tool_calls", None, [("read", {})]), ("tool_calls", "Now the fix.", [("edit", {"op": "swap"})]),
                    ("stop", "done", [])]
    assert trajectory.termination == "submitted" and not trajectory.segments and trajectory.num_turns == 3
    assert trajectory.prompt_ids == template_ids(tokenizer, [{"role": "user", "content": "fix it"}], True, TOOLS)
    assert [trajectory.response_ids[a:b] for a, b in trajectory.turn_spans] == generate.outputs
    observation = tokenizer.decode(trajectory.response_ids[trajectory.turn_spans[0][1]:trajectory.turn_spans[1][0]])
    assert observation == "<|tool|>result of read<|end|><|assistant|>"


def test_tools_are_refused_where_the_model_cannot_see_them(gateway, tokenizer):
    def body(client, link):
        with pytest.raises(openai.BadRequestError, match="does not show tools"):
            client.chat.completions.create(model=link.model, messages=[{"role": "user", "content": "x"}],
                                           tools=TOOLS)
        with pytest.raises(openai.BadRequestError, match="tool_choice"):
            client.chat.completions.create(model=link.model, messages=[{"role": "user", "content": "x"}],
                                           tools=TOOLS, tool_choice="required")
        return "ok"

    assert play(gateway, Program(body), ScriptedGenerate(["a"], tokenizer), tokenizer).termination == "error"
