"""The gateway against requests meant to stall or crash it: deep JSON, huge integers, lone surrogates, unknown
routes, bodies past the cap (declared or streamed), prompts far past the context, sessions that never end, a
sampler that fails. Each is refused in OpenAI's error shape, nothing refused is recorded, and no request holds up
the gateway's event loop."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import unicodedata
from typing import Any
from urllib.parse import urlsplit

import pytest
from test_gateway import LIMITS, TASK, Program, chat, judge, post

from agentrl_plugins.chat import template_ids
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.gateway.recorder import EpisodeRecorder
from agentrl_plugins.gateway.session import GatewaySession
from agentrl_plugins.gateway.token_bound import bytes_per_token, least_tokens
from agentrl_plugins.testing import ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling

OPENAI_ERROR_FIELDS = {"message", "type", "param", "code"}


def request(base_url: str, head: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """Send raw HTTP (``head`` without the blank line) and read the answer's status and JSON body: what an attacker
    sends, with no client library's checks in between."""
    address = urlsplit(base_url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        connection.sendall(head.encode() + b"\r\nHost: gateway\r\nConnection: close\r\n\r\n" + body)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def chat_body(content: Any, model: str = "agentrl") -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}]}).encode()


@pytest.fixture
def gateway():
    with Gateway(max_request_bytes=4 * 2**20) as running:
        yield running


def with_session(gateway, tokenizer, call, generate=None, limits=LIMITS):
    """``call(session)`` on a thread while a session, sampled by ``generate``, is open on a running loop."""
    async def main():
        session = gateway.open_session(generate or ScriptedGenerate(["ok"], tokenizer), tokenizer, limits,
                                       Sampling())
        return session, await asyncio.to_thread(call, session)

    return asyncio.run(main())


@pytest.mark.parametrize("body, words", [
    (b'{"model": "agentrl", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "too deeply"),
    (b'{"model": "agentrl", "messages": [], "max_tokens": ' + b"9" * 5000 + b"}", "not valid JSON"),
])
def test_json_that_crashes_the_parser_is_a_400(gateway, tokenizer, body, words):
    session, (status, answer) = with_session(
        gateway, tokenizer, lambda s: post(gateway.base_url + "/chat/completions", body, key=s.key))
    assert status == 400 and set(answer["error"]) == OPENAI_ERROR_FIELDS and words in answer["error"]["message"]


def test_a_lone_surrogate_is_a_400_naming_the_message(gateway, tokenizer):
    body = b'{"model": "agentrl", "messages": [{"role": "user", "content": "fix \\ud800 this"}]}'
    session, (status, answer) = with_session(
        gateway, tokenizer, lambda s: post(gateway.base_url + "/chat/completions", body, key=s.key))
    assert status == 400 and answer["error"]["param"] == "messages[0].content"
    assert "not valid Unicode" in answer["error"]["message"] and session.recorder.segments == []


@pytest.mark.parametrize("head, status, code", [
    ("GET /v1/completions HTTP/1.1", 404, "not_found"),
    ("GET /v1/chat/completions HTTP/1.1", 405, "method_not_allowed"),
    ("DELETE /v1/models HTTP/1.1", 405, "method_not_allowed"),
])
def test_unknown_routes_and_methods_answer_in_openai_shape(gateway, head, status, code):
    answered, answer = request(gateway.base_url, head)
    assert answered == status and set(answer["error"]) == OPENAI_ERROR_FIELDS and answer["error"]["code"] == code


def test_a_body_declared_past_the_cap_is_refused_before_it_is_sent(gateway):
    head = f"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer k\r\nContent-Length: {16 * 2**20}"
    status, answer = request(gateway.base_url, head)  # not a byte of the 16 MiB is sent
    assert status == 413 and answer["error"]["code"] == "request_too_large"


def test_a_streamed_body_past_the_cap_is_refused_as_it_passes_it(tokenizer):
    with Gateway(max_request_bytes=1000) as small:
        chunk = b"x" * 600
        body = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(3)) + b"0\r\n\r\n"
        status, answer = request(small.base_url, "POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer k\r\n"
                                                 "Transfer-Encoding: chunked", body)
    assert status == 413 and answer["error"]["code"] == "request_too_large"


class EncodeSpy:
    """Counts a recorder's :meth:`encode` calls and the threads they ran on (wrapping the real one)."""

    def __init__(self, recorder: EpisodeRecorder):
        self.encode, self.threads = recorder.encode, []
        recorder.encode = self  # type: ignore[method-assign]

    def __call__(self, continuation):
        self.threads.append(threading.current_thread().name)
        return self.encode(continuation)


def test_a_prompt_megabytes_past_the_context_is_refused_without_rendering_and_never_recorded(gateway, tokenizer):
    def call(session):
        spy = EncodeSpy(session.recorder)
        return spy, post(gateway.base_url + "/chat/completions", chat_body("fix the bug " * 270_000), key=session.key)

    session, (spy, (status, answer)) = with_session(gateway, tokenizer, call)
    assert status == 400 and answer["error"]["code"] == "context_length_exceeded"
    assert "at least" in answer["error"]["message"] and spy.threads == []
    assert session.recorder.segments == [] and session.termination == "max_context"


def test_a_refused_first_prompt_leaves_an_episode_with_no_tokens(gateway, tokenizer):
    spies = []

    def body(client, link):
        spies.append(EncodeSpy(gateway.sessions[link.api_key].recorder))
        try:
            chat(client, link, [{"role": "user", "content": "ab " * 400}])  # past INLINE_TEXT_CHARS
        except Exception as error:
            return type(error).__name__
        return "served"

    limits = Limits(max_turns=4, max_context_tokens=256, max_new_tokens_per_turn=8, timeout_s=30.0)
    trajectory = asyncio.run(play_agent_program(gateway, Program(body), TASK, ScriptedGenerate(["x"], tokenizer),
                                                tokenizer, limits, Sampling(), verifier=judge))
    assert trajectory.termination == "max_context" and trajectory.prompt_ids == [] == trajectory.response_ids
    assert len(spies[0].threads) == 1 and spies[0].threads[0] != "agentrl-gateway"  # tokenized, off the loop


def test_a_sampler_that_fails_is_a_500_in_openai_shape(gateway, tokenizer):
    async def failing(token_ids, sampling):
        raise RuntimeError("the engine died")

    session, (status, answer) = with_session(
        gateway, tokenizer, lambda s: post(gateway.base_url + "/chat/completions", chat_body("hi"), key=s.key),
        generate=failing)
    assert status == 500 and answer["error"]["type"] == "server_error" and "engine died" in answer["error"]["message"]


def factory_gateway(tokenizer, **options):
    def new_session(key, loop):
        return GatewaySession(key, ScriptedGenerate(["ok"], tokenizer), loop, tokenizer, LIMITS, Sampling(),
                              EpisodeRecorder(tokenizer))

    return Gateway(session_factory=new_session, **options)


def test_idle_sessions_expire_and_new_keys_past_the_cap_are_a_429(tokenizer):
    expired = []
    with factory_gateway(tokenizer, session_idle_s=60.0, max_sessions=2, on_expire=expired.append) as gateway:
        url = gateway.base_url + "/chat/completions"
        assert [post(url, chat_body("hi"), key=key)[0] for key in ("a", "b")] == [200, 200]
        status, answer = post(url, chat_body("hi"), key="c")
        assert status == 429 and answer["error"]["code"] == "too_many_sessions"
        assert post(url, chat_body("hi"), key="a")[0] == 200  # "a" is now the most recent
        last_b = gateway._last_call["b"]
        assert [s.key for s in gateway.expire_idle(now=last_b + 60.0)] == ["b"] and gateway.sessions.keys() == {"a"}
        assert [s.termination for s in expired] == ["expired"]
        status, answer = post(url, chat_body("hi"), key="b")
        assert status == 409 and "expired" in answer["error"]["message"]
        assert post(url, chat_body("hi"), key="c")[0] == 200  # room again


def test_a_call_in_flight_is_not_idleness(tokenizer):
    with factory_gateway(tokenizer, session_idle_s=1.0) as gateway:
        assert post(gateway.base_url + "/chat/completions", chat_body("hi"), key="a")[0] == 200
        gateway.sessions["a"].in_flight = True
        assert gateway.expire_idle(now=gateway._last_call["a"] + 5.0) == []
        gateway.sessions["a"].in_flight = False
        assert [s.key for s in gateway.expire_idle(now=gateway._last_call["a"] + 5.0)] == ["a"]


TRICKY_TEXT = ["\u1100\u1161\u11a8" * 50, "e\u0301" * 80, "🧪 fix it " * 30, "x" * 500, "<|im_end|>" * 20,
               "\u0958\u0959" * 40, "  padded  \n\n\t"]


def test_the_byte_bound_never_exceeds_the_tokens_the_template_renders(tokenizer):
    generator = random.Random(0)
    texts = TRICKY_TEXT + ["".join(generator.choice(["ab", "\u1100", "\u1161", "é", "e\u0301", " ", "<|", "🧪"])
                                   for _ in range(generator.randint(1, 300))) for _ in range(200)]
    for text in texts:
        messages = [{"role": "system", "content": text[:7]}, {"role": "user", "content": text}]
        rendered = template_ids(tokenizer, messages, add_generation_prompt=True)
        free_text = sum(len(tokenizer(unicodedata.normalize("NFC", m["content"]), add_special_tokens=False,
                                      split_special_tokens=True)["input_ids"]) for m in messages)
        assert least_tokens(tokenizer, messages) <= min(len(rendered), free_text), text
    assert least_tokens(tokenizer, [{"role": "user", "content": "fix the bug " * 270_000}]) > 50_000


def test_tokenizers_that_can_drop_text_get_no_bound():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"[UNK]": 0, "fix": 1}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    wordpiece = PreTrainedTokenizerFast(tokenizer_object=words)
    assert bytes_per_token(wordpiece) is None and least_tokens(wordpiece, [{"role": "user", "content": "x" * 9}]) == 0
    fused = Tokenizer(models.BPE({"a": 0, "<unk>": 1}, [], unk_token="<unk>", fuse_unk=True))
    assert bytes_per_token(PreTrainedTokenizerFast(tokenizer_object=fused)) is None
