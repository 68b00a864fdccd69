"""``agentrl gateway`` as a user starts it: a local model folder served on a free port, called with the ``openai``
client under two API keys (two sessions, one asking for another temperature), stopped with SIGTERM, every
session's tokens in the ``--record`` file."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import openai

from agentrl_plugins.chat import template_ids


def test_the_gateway_command_serves_records_and_stops_cleanly(tmp_path, random_model, tokenizer):
    random_model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    record = tmp_path / "sessions.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "agentrl_plugins", "gateway", "--model", str(tmp_path / "model"), "--port", "0",
         "--max-new-tokens", "6", "--record", str(record)], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        deadline = time.monotonic() + 120
        while "serving" not in line and time.monotonic() < deadline and server.poll() is None:
            line = server.stderr.readline()
        (base_url,) = re.findall(r"at (http://\S+/v1)", line)
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
