"""The gateway's cost, in one run: per call through the ``openai`` client against calling the sampler directly;
episodes per second of agent programs at 1, 8 and 64 concurrent programs against the built-in episode runner
playing the same conversations; and whether a hostile request stalls the others: another session's 2-character
call, idle and while 16 MiB bodies and 3 MiB prompts are being refused (the target: at most 2x idle; the sampler
on one thread there, as the attacker process takes a core).

    python benchmarks/bench_gateway.py [--calls 40] [--turns 3] [--only per-call|episodes|stall]

Needs the ``hf`` and ``gateway`` extras and ``openai``. A small random Qwen2 samples (8 tokens a reply), so the
figures isolate the gateway's own work: HTTP, JSON, rendering the new messages, the thread hop to the sampler.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import openai
import torch

from agentrl_plugins.environment import AgentLink, StepResult
from agentrl_plugins.episode import run_episodes
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.local_models import build_model, byte_chat_tokenizer
from agentrl_plugins.types import Limits, Sampling, Task, Verdict

SAMPLING = Sampling(temperature=1.0, max_new_tokens=8)


class EchoSession:
    """Answers every reply with the same observation; ends after ``turns`` replies."""

    def __init__(self, task: Task, turns: int):
        self.prompt, self.turns, self.replies = task.issue, turns, 0

    def step(self, action: str) -> StepResult:
        self.replies += 1
        return StepResult("observation: ok", done=self.replies >= self.turns)

    def outcome(self) -> Any:
        return self.replies

    def close(self) -> None:
        pass


class EchoSuite:
    """Both kinds of one toy environment: ``start`` for the episode runner, ``run_agent`` as an agent program."""

    system_prompt = "Answer briefly."

    def __init__(self, turns: int):
        self.turns = turns

    def tasks(self, split: str | None = None) -> list[Task]:
        return [Task(f"t{i}", "echo", "train", f"task number {i}") for i in range(64)]

    def start(self, task: Task) -> EchoSession:
        return EchoSession(task, self.turns)


class EchoAgent(EchoSuite):
    """The agent program: one ``openai`` client per gateway, ``with_options`` per episode (a new client costs about
    20 ms, its SSL context)."""

    def __init__(self, turns: int):
        super().__init__(turns)
        self.clients: dict[str, openai.OpenAI] = {}

    def run_agent(self, link: AgentLink) -> Any:
        if link.base_url not in self.clients:
            self.clients[link.base_url] = openai.OpenAI(base_url=link.base_url, api_key="-", max_retries=0)
        client = self.clients[link.base_url].with_options(api_key=link.api_key)
        session = self.start(link.task)
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": session.prompt}]
        while True:
            reply = client.chat.completions.create(model=link.model, messages=messages).choices[0].message.content
            result = session.step(reply or "")
            if result.done:
                return session.outcome()
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": result.observation}]


def verdict(outcome: Any) -> Verdict:
    return Verdict(1.0, True)


def plain_post(gateway: Gateway, key: str, body: bytes) -> None:
    """One call over a bare ``http.client`` connection: the gateway's own cost without the ``openai`` client's."""
    connection = http.client.HTTPConnection(gateway.host, gateway.port)
    connection.request("POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {key}",
                                                              "Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200, response.read()
    response.read()
    connection.close()


def per_call(gateway: Gateway, sampler: HFGenerator, tokenizer: Any, calls: int) -> tuple[float, float, float]:
    """Median seconds of one call made directly, through the gateway with the ``openai`` client and with a bare
    HTTP client (interleaved, same prompt)."""
    prompt = [{"role": "user", "content": "say something"}]
    ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    limits = Limits(max_turns=10**6, max_context_tokens=4096, max_new_tokens_per_turn=8, timeout_s=1e9)

    shared = openai.OpenAI(base_url=gateway.base_url, api_key="-", max_retries=0)

    body = json.dumps({"model": gateway.model_name, "messages": prompt}).encode()

    async def measure() -> tuple[list[float], list[float], list[float]]:
        direct, through, plain = [], [], []
        for _ in range(calls):
            session = gateway.open_session(sampler, tokenizer, limits, SAMPLING)
            client = shared.with_options(api_key=session.key)
            started = time.perf_counter()
            await sampler(ids, SAMPLING)
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            await asyncio.to_thread(client.chat.completions.create, model=gateway.model_name, messages=prompt)
            through.append(time.perf_counter() - started)
            gateway.close_session(session.key)
            session = gateway.open_session(sampler, tokenizer, limits, SAMPLING)
            started = time.perf_counter()
            await asyncio.to_thread(plain_post, gateway, session.key, body)
            plain.append(time.perf_counter() - started)
            gateway.close_session(session.key)
        return direct, through, plain

    return tuple(statistics.median(times) for times in asyncio.run(measure()))  # type: ignore[return-value]


def episodes_per_second(gateway: Gateway, sampler: HFGenerator, tokenizer: Any, turns: int,
                        concurrent: int) -> tuple[float, float]:
    """Episodes per second of ``concurrent`` episodes played by the runner and by agent programs."""
    limits = Limits(max_turns=turns + 1, max_context_tokens=4096, max_new_tokens_per_turn=8, timeout_s=600)
    built_in, agent = EchoSuite(turns), EchoAgent(turns)
    tasks = built_in.tasks()[:concurrent]

    async def runner() -> None:
        await run_episodes(built_in, tasks, sampler, tokenizer, limits, verifier=verdict, sampling=SAMPLING)

    async def programs() -> None:
        await asyncio.gather(*(play_agent_program(gateway, agent, task, sampler, tokenizer, limits, SAMPLING,
                                                  verifier=verdict) for task in tasks))

    rates = []
    for play in (runner, programs):
        started = time.perf_counter()
        asyncio.run(play())
        rates.append(concurrent / (time.perf_counter() - started))
    return rates[0], rates[1]


ATTACKER = """
import json, signal, socket, sys
host, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = json.dumps({"model": sys.argv[4], "messages": [{"role": "user", "content": "x" * size}]}).encode()
head = (f"POST /v1/chat/completions HTTP/1.1\\r\\nHost: gateway\\r\\nAuthorization: Bearer attacker\\r\\n"
        f"Content-Type: application/json\\r\\nContent-Length: {len(body)}\\r\\n\\r\\n").encode()
sent = 0
signal.signal(signal.SIGTERM, lambda *_: (print(sent, flush=True), sys.exit(0)))
print("ready", flush=True)
while sys.argv[5] == "flood" or sys.stdin.readline():
    with socket.create_connection((host, port), timeout=300) as connection:
        try:
            connection.sendall(head + body)
            connection.recv(65536)
        except OSError:  # refused before the body was read: the gateway closed the connection
            pass
    sent += 1
"""
"""An attacker, as a process of its own: sends a body of ``size`` bytes whole, again and again (``flood``) or once
per line it reads."""


def small_call_latency(gateway: Gateway, sampler: HFGenerator, tokenizer: Any, calls: int,
                       attack_size: int | None = None, flood: bool = False) -> tuple[float, float]:
    """Median seconds of a 2-character call of a fresh session: alone, or alongside an attacker process sending a
    body of ``attack_size`` bytes as each call starts (``flood``: again and again); and how many attacking requests
    the gateway refused per second."""
    limits = Limits(max_turns=10**6, max_context_tokens=4096, max_new_tokens_per_turn=8, timeout_s=1e9)
    body = json.dumps({"model": gateway.model_name, "messages": [{"role": "user", "content": "hi"}]}).encode()
    attacker = None
    if attack_size:
        attacker = subprocess.Popen([sys.executable, "-c", ATTACKER, gateway.host, str(gateway.port), str(attack_size),
                                     gateway.model_name, "flood" if flood else "each"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
        assert attacker.stdout is not None and attacker.stdout.readline().strip() == "ready"

    async def measure() -> list[float]:
        times = []
        for _ in range(calls):
            session = gateway.open_session(sampler, tokenizer, limits, SAMPLING)
            if attacker is not None and not flood:
                assert attacker.stdin is not None
                attacker.stdin.write("go\n")
                attacker.stdin.flush()
                time.sleep(0.002)  # its request first
            started = time.perf_counter()
            await asyncio.to_thread(plain_post, gateway, session.key, body)
            times.append(time.perf_counter() - started)
            gateway.close_session(session.key)
        return times

    try:
        time.sleep(0.5 if flood else 0)
        started = time.perf_counter()
        latency = statistics.median(asyncio.run(measure()))
        took = time.perf_counter() - started
    finally:
        if attacker is not None:
            attacker.terminate()
    sent = int(attacker.communicate()[0] or 0) if attacker is not None else 0
    return latency, sent / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--only", choices=("per-call", "episodes", "stall"))
    args = parser.parse_args()
    tokenizer = byte_chat_tokenizer()
    sampler = HFGenerator(build_model(tokenizer, seed=0).eval(), tokenizer.eos_token_id, tokenizer.pad_token_id,
                          seed=0)
    with Gateway() as gateway:
        if args.only in (None, "per-call"):
            direct, through, plain = per_call(gateway, sampler, tokenizer, args.calls)
            print(f"per call (median of {args.calls}): the sampler directly {direct * 1e3:.2f} ms")
            for name, took in (("the gateway, bare HTTP client", plain), ("the gateway, openai client", through)):
                print(f"  through {name}: {took * 1e3:.2f} ms, {took / direct:.2f}x "
                      f"(+{(took - direct) * 1e3:.2f} ms)")
        if args.only in (None, "episodes"):
            print(f"episodes/s ({args.turns} turns, 8 tokens a reply): concurrent  runner  agent programs  ratio")
            for concurrent in (1, 8, 64):
                runner, programs = episodes_per_second(gateway, sampler, tokenizer, args.turns, concurrent)
                print(f"{concurrent:>60}  {runner:6.1f}  {programs:14.1f}  {programs / runner:5.2f}x")
        if args.only in (None, "stall"):
            torch.set_num_threads(1)  # the attacker takes a core: two OpenMP threads on one would measure contention
            idle, _ = small_call_latency(gateway, sampler, tokenizer, args.calls)
            print(f"a 2-character call (median of {args.calls}): idle {idle * 1e3:.2f} ms")
            for name, size in (("a 16 MiB body (over the byte cap)", 16 * 2**20),
                               ("a 3 MiB prompt (within it, far past the context)", 3 * 2**20)):
                for flood in (False, True):
                    took, rate = small_call_latency(gateway, sampler, tokenizer, args.calls, size, flood)
                    how = f"a flood of {rate:.0f}/s of {name}" if flood else f"{name} sent as it starts"
                    print(f"  alongside {how}: {took * 1e3:.2f} ms, {took / idle:.2f}x idle")
            print("  (the target: at most 2x idle alongside a refused 16 MiB request)")


if __name__ == "__main__":
    main()
