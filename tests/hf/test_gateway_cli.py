"""``agentrl gateway`` as a user starts it: a local model folder served on a free port, called with the ``openai``
client under two API keys (two sessions, one asking for another temperature), stopped with SIGTERM, every
session's tokens in the ``--record`` file; idle sessions expire into the record as they go, and SIGTERM ends it
within seconds while a client holds a request half sent."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time

import openai

from agentrl_plugins.chat import template_ids


def start_gateway(tmp_path, random_model, tokenizer, *options: str) -> tuple[subprocess.Popen, str]:
    """``agentrl gateway`` over a saved copy of the model, and its base URL once it serves."""
    random_model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    server = subprocess.Popen([sys.executable, "-m", "agentrl_plugins", "gateway", "--model", str(tmp_path / "model"),
                               "--port", "0", "--max-new-tokens", "6", *options], stderr=subprocess.PIPE, text=True)
    line = server.stderr.readline()
    deadline = time.monotonic() + 120
    while "serving" not in line and time.monotonic() < deadline and server.poll() is None:
        line = server.stderr.readline()
    (base_url,) = re.findall(r"at (http://\S+/v1)", line)
    return server, base_url


def test_the_gateway_command_serves_records_and_stops_cleanly(tmp_path, random_model, tokenizer):
    record = tmp_path / "sessions.jsonl"
    server, base_url = start_gateway(tmp_path, random_model, tokenizer, "--record", str(record))
    try:
        replies = {}
        for key in ("alice", "bob"):
            client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
            other = {"temperature": 0.3} if key == "bob" else {}  # counted: the gateway samples at its own settings
            reply = client.chat.completions.create(model="model", messages=[{"role": "user", "content": key}],
                                                   **other)
            replies[key] = reply
            assert reply.usage.completion_tokens <= 6
        assert [m.id for m in client.models.list()] == ["model"]
    finally:
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=60)
    assert server.returncode == 0, errors
    sessions = {row["key"]: row for row in map(json.loads, record.read_text().splitlines())}
    assert set(sessions) == {"alice", "bob"} and "recorded 2 sessions" in errors
    assert (sessions["alice"]["sampling_overridden"], sessions["bob"]["sampling_overridden"]) == (0, 1)
    for key, row in sessions.items():
        (segment,) = row["segments"]
        assert segment["prompt_ids"] == template_ids(tokenizer, [{"role": "user", "content": key}], True)
        assert len(segment["response_ids"]) == replies[key].usage.completion_tokens == len(segment["logprobs"])


def test_idle_sessions_expire_into_the_record_and_sigterm_ends_a_half_sent_request(tmp_path, random_model,
                                                                                    tokenizer):
    record = tmp_path / "sessions.jsonl"
    server, base_url = start_gateway(tmp_path, random_model, tokenizer, "--record", str(record),
                                     "--session-idle-s", "2")
    held = socket.create_connection(re.findall(r"//([^:/]+):(\d+)", base_url)[0])
    try:
        clients = {key: openai.OpenAI(base_url=base_url, api_key=key, max_retries=0) for key in ("alice", "bob")}
        for client in clients.values():
            client.chat.completions.create(model="model", messages=[{"role": "user", "content": "hi"}])
        time.sleep(2.5)
        openai.OpenAI(base_url=base_url, api_key="carol", max_retries=0).chat.completions.create(
            model="model", messages=[{"role": "user", "content": "hi"}])
        expired = [json.loads(line) for line in record.read_text().splitlines()]
        assert sorted((row["key"], row["termination"]) for row in expired) == [("alice", "expired"),
                                                                               ("bob", "expired")]
        try:
            clients["alice"].chat.completions.create(model="model", messages=[{"role": "user", "content": "hi"}])
        except openai.ConflictError as error:
            assert "expired" in str(error)
        else:
            raise AssertionError("an expired session was served")
        held.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer dave\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\": ")
        time.sleep(0.2)
    finally:
        stopped = time.monotonic()
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=60)
        took = time.monotonic() - stopped
        held.close()
    # the old gateway waited on the held connection for good; 15 s is 7x the shutdown grace, for a loaded machine
    assert server.returncode == 0 and took < 15, (took, errors)
    keys = [json.loads(line)["key"] for line in record.read_text().splitlines()]
    assert sorted(keys[:2]) == ["alice", "bob"] and keys[2:] == ["carol"] and "recorded 3 sessions" in errors
