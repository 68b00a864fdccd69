"""Benchmark the BugFix gym: environment steps, test-run latency and sandbox concurrency, as ratios.

Run ``python envs/bugfix_gym/benchmarks/bench_gym.py [--seconds N] [--seed S] [--json]``. Absolute
times depend on the machine and on whatever else runs on it, so every comparison is made within one
run, with the two sides interleaved where possible; read the ratios, not the raw figures.

1. Environment steps per second. Episodes cycle through every family; each is up to 6 messages drawn
   uniformly from the family's menu (read, test, submit, its edit ops, one malformed message) with one
   seeded ``torch.Generator``, then scored with the ``hidden_tests`` verifier, which runs the public and
   hidden tests for a submitted episode. Every episode is played on two gyms in turn: one with the
   result cache disabled (``cache_size=0``: every ``test`` step and every verification goes to the
   sandbox) and one with the default cache. Only the episodes themselves (start, steps, verifier) are
   timed. "repeated test runs" is the share of test runs identical to an earlier one in the run, i.e.
   what the cache can answer; the speedup grows with it.
2. Test-run latency: the first family's fixed source on its public + hidden cases, run (a) in process
   with ``run_in_process`` (no isolation: the floor), (b) through ``Sandbox.run`` on a warm pool and (c)
   by a brand-new ``python -I -c`` interpreter per call that loads the source and runs the same cases
   (no limits, no preloaded modules: a lower bound on what a sandbox without a warm pool would cost).
   The three are called in turn, round after round; the ratios compare medians. The three must agree
   on every case's outcome, or the benchmark stops.
3. Concurrency: ``Sandbox.run`` throughput (runs per second) with 1 calling thread and with 4 calling
   threads on one pool of 2 workers, alternated over five rounds. The ratio is bounded by the worker
   count and by the CPUs free on the machine.

``--seconds`` is the total time budget of the three measurements (interpreter and pool start-up come
on top); the phases split it 40/30/30.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence

import torch

from agentrl_plugins.types import Task

from bugfix_gym import policies
from bugfix_gym.env import BugFixGym
from bugfix_gym.families import FAMILIES
from bugfix_gym.family import Family
from bugfix_gym.grammar import format_call
from bugfix_gym.sandbox import Sandbox, TestCase, run_in_process
from bugfix_gym.verifiers import hidden_tests

MAX_TURNS = 6
WORKERS = 2
THREADS = (1, 4)
CONCURRENCY_ROUNDS = 5
MIN_LATENCY_ROUNDS = 20
SHARES = {"steps": 0.4, "latency": 0.3, "concurrency": 0.3}
TEST_MESSAGE = format_call("test")
FRESH_INTERPRETER = (
    "import json, pickle, sys\n"
    "source, function, pairs = pickle.load(sys.stdin.buffer)\n"
    "namespace = {'__name__': '__candidate__'}\n"
    "exec(compile(source, '<candidate>', 'exec'), namespace)\n"
    "for index, (args, expected) in enumerate(pairs):\n"
    "    got = namespace[function](*args)\n"
    "    print(json.dumps({'case': index, 'passed': got == expected, 'got': repr(got)}))\n"
)
Call = tuple[str, str, Sequence[TestCase]]


def progress(phase: int, text: str, seconds: float) -> None:
    print(f"[{phase}/3] {text} (~{seconds:.0f} s)", file=sys.stderr, flush=True)


def episode_plan(seed: int) -> Iterator[tuple[Family, list[str]]]:
    """Endless round-robin over the families, each episode's messages drawn from one seeded generator."""
    generator = torch.Generator().manual_seed(seed)
    for index in itertools.count():
        family = FAMILIES[index % len(FAMILIES)]
        yield family, policies.random_messages(family, MAX_TURNS, generator)


def play(gym: BugFixGym, task: Task, family: Family, messages: list[str]) -> tuple[float, int, list[tuple[str, str]]]:
    """Play and verify one episode: (seconds taken, steps, (cases, source) of every test run it made)."""
    runs = []
    start = time.perf_counter()
    session = gym.start(task)
    steps = 0
    for message in messages:
        steps += 1
        if message == TEST_MESSAGE:
            runs.append(("public", session.source))
        if session.step(message).done:
            break
    hidden_tests(session.outcome())
    seconds = time.perf_counter() - start
    if session.submitted:
        runs.append(("public+hidden", session.source))
    return seconds, steps, runs


def start_pool(gym: BugFixGym) -> None:
    """Start the gym's sandbox pool with a request the benchmark never repeats (no cases)."""
    family = FAMILIES[0]
    gym.run_tests(family.fixed, family.function, ())


def measure_steps(seed: int, seconds: float) -> dict:
    """Play the same seeded episodes (one pass over the families at least) on a gym without and with the cache."""
    gyms = {"no_cache": BugFixGym(cache_size=0), "cache": BugFixGym()}
    busy = dict.fromkeys(gyms, 0.0)
    episodes = steps = 0
    runs: list[tuple[str, str, str]] = []
    try:
        for gym in gyms.values():
            start_pool(gym)
        tasks = {task.family: task for task in gyms["cache"].tasks()}
        deadline = time.monotonic() + seconds
        for family, messages in episode_plan(seed):
            if episodes >= len(FAMILIES) and time.monotonic() >= deadline:
                break
            for name, gym in gyms.items():
                elapsed, episode_steps, episode_runs = play(gym, tasks[family.name], family, messages)
                busy[name] += elapsed
            episodes += 1
            steps += episode_steps
            runs.extend((family.name, *run) for run in episode_runs)
    finally:
        for gym in gyms.values():
            gym.close()
    no_cache, cache = steps / busy["no_cache"], steps / busy["cache"]
    return {
        "episodes": episodes,
        "steps": steps,
        "test_runs": len(runs),
        "repeated_test_runs": 1 - len(set(runs)) / len(runs) if runs else 0.0,
        "steps_per_s_no_cache": no_cache,
        "steps_per_s_cache": cache,
        "ratio_cache_over_no_cache": cache / no_cache,
    }


def new_interpreter(source: str, function: str, cases: Sequence[TestCase]) -> str:
    """Run the cases in a brand-new interpreter; its stdout, one JSON line per case."""
    payload = pickle.dumps((source, function, [(case.args, case.expected) for case in cases]))
    return subprocess.run([sys.executable, "-I", "-c", FRESH_INTERPRETER], input=payload,
                          capture_output=True, check=True).stdout.decode()


def check_agreement(call: Call, sandbox: Sandbox) -> None:
    """The three ways of running the cases must report the same outcome for every case."""
    in_process = [result.passed for result in run_in_process(*call).results]
    sandboxed = [result.passed for result in sandbox.run(*call).results]
    fresh = [json.loads(line)["passed"] for line in new_interpreter(*call).splitlines()]
    if not in_process == sandboxed == fresh:
        raise RuntimeError(f"runners disagree: in process {in_process}, sandbox {sandboxed}, new interpreter {fresh}")


def interleaved_latencies(runners: dict[str, Callable], call: Call, seconds: float) -> dict[str, list[float]]:
    """Seconds per call of each runner, calling them in turn until the time is up (and a minimum of rounds)."""
    samples: dict[str, list[float]] = {name: [] for name in runners}
    deadline = time.monotonic() + seconds
    for rounds in itertools.count():
        if rounds >= MIN_LATENCY_ROUNDS and time.monotonic() >= deadline:
            return samples
        for name, runner in runners.items():
            start = time.perf_counter()
            runner(*call)
            samples[name].append(time.perf_counter() - start)


def summary_ms(samples: list[float]) -> dict[str, float]:
    return {"median": 1e3 * statistics.median(samples),
            "p90": 1e3 * statistics.quantiles(samples, n=10, method="inclusive")[-1]}


def measure_latency(call: Call, sandbox: Sandbox, seconds: float) -> dict:
    check_agreement(call, sandbox)
    runners = {"in_process": run_in_process, "sandbox": sandbox.run, "new_interpreter": new_interpreter}
    samples = interleaved_latencies(runners, call, seconds)
    ms = {name: summary_ms(values) for name, values in samples.items()}
    return {
        "calls_each": len(samples["sandbox"]),
        "ms": ms,
        "ratio_sandbox_over_in_process": ms["sandbox"]["median"] / ms["in_process"]["median"],
        "ratio_new_interpreter_over_sandbox": ms["new_interpreter"]["median"] / ms["sandbox"]["median"],
    }


def run_for(sandbox: Sandbox, call: Call, deadline: float) -> int:
    """Call ``sandbox.run`` until the deadline; how many calls finished."""
    calls = 0
    while time.monotonic() < deadline:
        sandbox.run(*call)
        calls += 1
    return calls


def throughput(sandbox: Sandbox, call: Call, threads: int, seconds: float) -> tuple[int, float]:
    """(runs finished, seconds taken) by ``threads`` threads calling the sandbox for ``seconds``."""
    start = time.perf_counter()
    deadline = time.monotonic() + seconds
    with ThreadPoolExecutor(threads) as pool:
        calls = sum(pool.map(lambda _: run_for(sandbox, call, deadline), range(threads)))
    return calls, time.perf_counter() - start


def measure_concurrency(call: Call, sandbox: Sandbox, seconds: float) -> dict:
    """Runs per second for each thread count, the thread counts alternated over a few rounds."""
    totals = {threads: [0, 0.0] for threads in THREADS}
    for _ in range(CONCURRENCY_ROUNDS):
        for threads in THREADS:
            calls, elapsed = throughput(sandbox, call, threads, seconds / (CONCURRENCY_ROUNDS * len(THREADS)))
            totals[threads][0] += calls
            totals[threads][1] += elapsed
    rates = {threads: calls / elapsed for threads, (calls, elapsed) in totals.items()}
    low, high = THREADS
    return {
        "workers": WORKERS,
        "runs_per_s": {str(threads): rate for threads, rate in rates.items()},
        f"ratio_{high}_over_{low}_threads": rates[high] / rates[low],
    }


def benchmark(seconds: float, seed: int) -> dict:
    started = time.perf_counter()
    family = FAMILIES[0]
    call = (family.fixed, family.function, family.public_tests + family.hidden_tests)
    progress(1, "environment steps, cache off vs default cache", SHARES["steps"] * seconds)
    steps = measure_steps(seed, SHARES["steps"] * seconds)
    with Sandbox(workers=WORKERS) as sandbox:
        progress(2, f"test-run latency on {family.name}: in process, warm sandbox, new interpreter",
                 SHARES["latency"] * seconds)
        latency = measure_latency(call, sandbox, SHARES["latency"] * seconds)
        progress(3, f"sandbox throughput, {' vs '.join(map(str, THREADS))} threads, {WORKERS} workers",
                 SHARES["concurrency"] * seconds)
        concurrency = measure_concurrency(call, sandbox, SHARES["concurrency"] * seconds)
    return {
        "config": {"seed": seed, "seconds": seconds, "cpus": os.cpu_count(), "family": family.name,
                   "cases": len(call[2]), "max_turns": MAX_TURNS},
        "steps": steps,
        "latency": latency,
        "concurrency": concurrency,
        "elapsed_s": time.perf_counter() - started,
    }


def table(results: dict) -> str:
    config, steps, latency, concurrency = (results[key] for key in ("config", "steps", "latency", "concurrency"))
    ms = latency["ms"]
    rates = concurrency["runs_per_s"]
    low, high = THREADS
    lines = [
        f"BugFix gym benchmark: seed {config['seed']}, budget {config['seconds']:g} s, "
        f"{config['cpus']} CPUs, took {results['elapsed_s']:.1f} s",
        f"1. env steps: {steps['episodes']} episodes of <= {config['max_turns']} turns, {steps['steps']} steps, "
        f"{steps['test_runs']} test runs ({steps['repeated_test_runs']:.0%} repeated)",
        f"   {'steps/s, cache off':<34}{steps['steps_per_s_no_cache']:>10.1f}",
        f"   {'steps/s, default cache':<34}{steps['steps_per_s_cache']:>10.1f}",
        f"   {'ratio default cache / cache off':<34}{steps['ratio_cache_over_no_cache']:>9.1f}x",
        f"2. test-run latency: {config['family']}, {config['cases']} cases, {latency['calls_each']} calls each",
        f"   {'':<34}{'median ms':>10}{'p90 ms':>10}",
    ]
    labels = {"in_process": "in process", "sandbox": "warm sandbox", "new_interpreter": "new python -c interpreter"}
    lines += [f"   {label:<34}{ms[name]['median']:>10.3f}{ms[name]['p90']:>10.3f}" for name, label in labels.items()]
    lines += [
        f"   {'ratio warm sandbox / in process':<34}{latency['ratio_sandbox_over_in_process']:>9.0f}x",
        f"   {'ratio new interpreter / sandbox':<34}{latency['ratio_new_interpreter_over_sandbox']:>9.1f}x",
        f"3. sandbox throughput, {concurrency['workers']} workers",
        f"   {f'runs/s, {low} thread':<34}{rates[str(low)]:>10.1f}",
        f"   {f'runs/s, {high} threads':<34}{rates[str(high)]:>10.1f}",
        f"   {f'ratio {high} threads / {low} thread':<34}{concurrency[f'ratio_{high}_over_{low}_threads']:>9.2f}x",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="time budget of the measurements (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the episodes' message draws (default 0)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    results = benchmark(args.seconds, args.seed)
    print(json.dumps(results, indent=2) if args.json else table(results))


if __name__ == "__main__":
    main()
