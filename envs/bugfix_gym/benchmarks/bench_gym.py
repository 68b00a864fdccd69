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
2. Test-run latency: the first family's fixed source on its public + hidden cases (fresh state per call),
   run (a) in process with ``run_in_process`` (no isolation: the floor), (b) in a plain fork of this
   process per call (no confinement; this process holds torch), (c) through ``Sandbox.run`` with every
   layer on, (d) through a sandbox with one layer left out, for each layer, and with none, and (e) by a
   brand-new ``python -I -c`` interpreter per call. All are called
   in turn, round after round, with 30 ms of quiet after each call (a sandbox prepares its next run after
   a call; the pause keeps that work out of the next measurement, so every call meets idle CPUs); the
   ratios compare medians, and a layer's cost is the median with it minus the median without it. Then
   in process and the sandbox again, each on its own at one call every 20 ms (a steady rate the pool
   sustains: each run's processes take about 10 ms of CPU to prepare on this 2-core machine).
   All must agree on every case's outcome, or the benchmark stops.
3. Concurrency: ``Sandbox.run`` throughput (runs per second, back to back) with 1, 2, 4 and 8 calling
   threads on one pool, alternated over five rounds, and each count's p50 latency. Bounded by the worker
   count and by the CPUs free on the machine: each run's processes are prepared after the one before.

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
from bugfix_gym.sandbox import LAYERS, Sandbox, TestCase, run_in_fork, run_in_process
from bugfix_gym.verifiers import hidden_tests

MAX_TURNS = 6
WORKERS = 4
THREADS = (1, 2, 4, 8)
LEFT_OUT = ("view", "run_namespaces", "private_tmp", "seccomp")  # "network" comes with the view
CONCURRENCY_ROUNDS = 5
MIN_LATENCY_ROUNDS = 20
SETTLE_S = 0.03
PACED_S, PACED_CALLS = 0.02, 100  # the paced measurement: one call every 20 ms, half the pool's capacity
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


def check_agreement(call: Call, runners: dict[str, Callable]) -> None:
    """Every way of running the cases must report the same outcome for every case."""
    outcomes = {name: [result.passed for result in runner(*call).results] for name, runner in runners.items()
                if name != "new_interpreter"}
    outcomes["new_interpreter"] = [json.loads(line)["passed"] for line in new_interpreter(*call).splitlines()]
    if len({tuple(outcome) for outcome in outcomes.values()}) != 1:
        raise RuntimeError(f"runners disagree: {outcomes}")


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
            time.sleep(SETTLE_S)  # a sandbox prepares its next run after each call: let it finish


def paced_latencies(runners: dict[str, Callable], call: Call, gap_s: float, calls: int) -> dict[str, list[float]]:
    """Seconds per call of each runner on its own, one call every ``gap_s``: a steady rate, a warm machine."""
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for name, runner in runners.items():
        for _ in range(calls):
            start = time.perf_counter()
            runner(*call)
            samples[name].append(time.perf_counter() - start)
            time.sleep(max(0.0, gap_s - (time.perf_counter() - start)))
    return samples


def summary_ms(samples: list[float]) -> dict[str, float]:
    return {"median": 1e3 * statistics.median(samples),
            "p90": 1e3 * statistics.quantiles(samples, n=10, method="inclusive")[-1]}


def measure_latency(call: Call, sandbox: Sandbox, seconds: float) -> dict:
    """Medians of each runner, interleaved, and what each sandbox layer costs."""
    without = {layer: Sandbox(workers=2, layers=set(LAYERS) - {layer}) for layer in LEFT_OUT}
    no_layer = Sandbox(workers=2, layers=())
    try:
        runners = {"in_process": run_in_process, "fork_per_call": run_in_fork, "sandbox": sandbox.run,
                   "no_layer": no_layer.run,
                   **{f"without_{layer}": box.run for layer, box in without.items()},
                   "new_interpreter": new_interpreter}
        check_agreement(call, runners)
        samples = interleaved_latencies(runners, call, seconds)
    finally:
        for box in [*without.values(), no_layer]:
            box.close()
    ms = {name: summary_ms(values) for name, values in samples.items()}
    median = {name: figures["median"] for name, figures in ms.items()}
    paced = paced_latencies({"in_process": run_in_process, "sandbox": sandbox.run}, call, PACED_S, PACED_CALLS)
    return {
        "calls_each": len(samples["sandbox"]),
        "ms": ms,
        "paced_ms": {name: summary_ms(values) for name, values in paced.items()},
        "layer_cost_ms": {layer: median["sandbox"] - median[f"without_{layer}"] for layer in LEFT_OUT},
        "ratio_sandbox_over_in_process": median["sandbox"] / median["in_process"],
        "ratio_sandbox_over_fork_per_call": median["sandbox"] / median["fork_per_call"],
        "ratio_new_interpreter_over_sandbox": median["new_interpreter"] / median["sandbox"],
    }


def run_for(sandbox: Sandbox, call: Call, deadline: float) -> list[float]:
    """Call ``sandbox.run`` back to back until the deadline; the seconds each call took."""
    took = []
    while time.monotonic() < deadline:
        start = time.perf_counter()
        sandbox.run(*call)
        took.append(time.perf_counter() - start)
    return took


def throughput(sandbox: Sandbox, call: Call, threads: int, seconds: float) -> tuple[list[float], float]:
    """(seconds of each call, seconds taken) by ``threads`` threads calling the sandbox for ``seconds``."""
    start = time.perf_counter()
    deadline = time.monotonic() + seconds
    with ThreadPoolExecutor(threads) as pool:
        took = [value for values in pool.map(lambda _: run_for(sandbox, call, deadline), range(threads))
                for value in values]
    return took, time.perf_counter() - start


def measure_concurrency(call: Call, sandbox: Sandbox, seconds: float) -> dict:
    """Runs per second and p50 latency for each thread count, the thread counts alternated over a few rounds."""
    calls: dict[int, list[float]] = {threads: [] for threads in THREADS}
    elapsed = dict.fromkeys(THREADS, 0.0)
    for _ in range(CONCURRENCY_ROUNDS):
        for threads in THREADS:
            took, spent = throughput(sandbox, call, threads, seconds / (CONCURRENCY_ROUNDS * len(THREADS)))
            calls[threads] += took
            elapsed[threads] += spent
    rates = {threads: len(calls[threads]) / elapsed[threads] for threads in THREADS}
    return {
        "workers": WORKERS,
        "runs_per_s": {str(threads): rate for threads, rate in rates.items()},
        "p50_ms": {str(threads): 1e3 * statistics.median(calls[threads]) for threads in THREADS},
        f"ratio_{THREADS[-1]}_over_{THREADS[0]}_threads": rates[THREADS[-1]] / rates[THREADS[0]],
    }


def benchmark(seconds: float, seed: int) -> dict:
    started = time.perf_counter()
    family = FAMILIES[0]
    call = (family.fixed, family.function, family.public_tests + family.hidden_tests)
    progress(1, "environment steps, cache off vs default cache", SHARES["steps"] * seconds)
    steps = measure_steps(seed, SHARES["steps"] * seconds)
    with Sandbox(workers=WORKERS) as sandbox:
        progress(2, f"test-run latency on {family.name}: in process, fork, sandbox (each layer left out), "
                 "new interpreter",
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
    labels = {"in_process": "in process", "fork_per_call": "fork per call, no confinement",
              "sandbox": "sandbox, every layer", "no_layer": "sandbox, no layer (its floor)",
              **{f"without_{layer}": f"sandbox without {layer}" for layer in LEFT_OUT},
              "new_interpreter": "new python -c interpreter"}
    lines += [f"   {label:<34}{ms[name]['median']:>10.3f}{ms[name]['p90']:>10.3f}" for name, label in labels.items()]
    lines += [
        f"   {'ratio sandbox / in process':<34}{latency['ratio_sandbox_over_in_process']:>9.1f}x",
        f"   {'ratio sandbox / fork per call':<34}{latency['ratio_sandbox_over_fork_per_call']:>9.2f}x",
        f"   {'ratio new interpreter / sandbox':<34}{latency['ratio_new_interpreter_over_sandbox']:>9.1f}x",
        f"   paced, one call every {PACED_S * 1e3:g} ms, {PACED_CALLS} calls: median ms (p90)",
        *(f"   {f'  {name}':<34}{figures['median']:>10.3f}{figures['p90']:>10.3f}"
          for name, figures in latency["paced_ms"].items()),
        "   cost of each layer (median with it - without it, ms):",
        *(f"   {f'  {layer}':<34}{cost:>10.3f}" for layer, cost in latency["layer_cost_ms"].items()),
        f"3. sandbox throughput, {concurrency['workers']} workers, calls back to back",
        f"   {'':<34}{'runs/s':>10}{'p50 ms':>10}",
        *(f"   {f'{threads} calling thread(s)':<34}{rates[str(threads)]:>10.1f}"
          f"{concurrency['p50_ms'][str(threads)]:>10.3f}" for threads in THREADS),
        f"   {f'ratio {THREADS[-1]} threads / {THREADS[0]} thread':<34}"
        f"{concurrency[f'ratio_{THREADS[-1]}_over_{THREADS[0]}_threads']:>9.2f}x",
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
