"""The gateway's cost, in one run: per call through the ``openai`` client against calling the sampler directly,
and episodes per second of agent programs at 1, 8 and 64 concurrent programs against the built-in episode runner
playing the same conversations.

    python benchmarks/bench_gateway.py [--calls 40] [--turns 3]

Needs the ``hf`` and ``gateway`` extras and ``openai``. A small random Qwen2 samples (8 tokens a reply), so the
figures isolate the gateway's own work: HTTP, JSON, rendering the new messages, the thread hop to the sampler.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import time
from typing import Any

import openai

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    tokenizer = byte_chat_tokenizer()
    sampler = HFGenerator(build_model(tokenizer, seed=0).eval(), tokenizer.eos_token_id, tokenizer.pad_token_id,
                          seed=0)
    with Gateway() as gateway:
        direct, through, plain = per_call(gateway, sampler, tokenizer, args.calls)
        print(f"per call (median of {args.calls}): the sampler directly {direct * 1e3:.2f} ms")
        for name, took in (("the gateway, bare HTTP client", plain), ("the gateway, openai client", through)):
            print(f"  through {name}: {took * 1e3:.2f} ms, {took / direct:.2f}x (+{(took - direct) * 1e3:.2f} ms)")
        print(f"episodes/s ({args.turns} turns, 8 tokens a reply): concurrent  runner  agent programs  ratio")
        for concurrent in (1, 8, 64):
            runner, programs = episodes_per_second(gateway, sampler, tokenizer, args.turns, concurrent)
            print(f"{concurrent:>60}  {runner:6.1f}  {programs:14.1f}  {programs / runner:5.2f}x")


if __name__ == "__main__":
    main()
