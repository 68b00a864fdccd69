"""vLLM's CPU build against the core's HF sampler (the stand-in) on the laptop recipe's episodes: episodes/s at 1,
8 and 32 concurrent episodes, and what each costs to start, interleaved in one run (issue 38, item 7).

Both sample the same model (float32, so the two draw from the same distribution), tasks and seeds, token ids in
and out; the engine through :class:`~agentrl_plugins.vllm_generator.VLLMGenerator` with its prefix cache, the HF
sampler with continuous batching and its prefix store. Their draws differ (two generators), so the sampled
tokens per episode are printed beside the rates. The ratios are the result (absolute seconds on a shared machine
are noisy). Run it in the TRL environment, which has the engine:

    .venvs/trl/bin/python benchmarks/bench_engine.py [--random-model] [--concurrency 1 8 32] [--episodes 32]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from typing import Any

import torch
from bench_sampler import play

from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.recipe import Recipe, load_recipe
from agentrl_plugins.vllm_generator import VLLMGenerator

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process: its CPU time counted
ENGINE_SETTINGS = {"dtype": "float32", "enable_prefix_caching": True, "max_num_batched_tokens": 4096}
"""TRL's colocated engine's batch budget, float32 like the HF sampler."""


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def model_folder(random_model: bool, recipe: Recipe) -> str:
    """The recipe's model folder (through the model registry), or a random TinyAgent-sized model saved to one
    (vLLM's CPU attention needs TinyAgent's head size, 32)."""
    from agentrl_plugins.models import run_model

    path = str(run_model(recipe, None, prepare=True))
    if not random_model:
        return path
    from transformers import AutoTokenizer

    from agentrl_tinyagent.model import TINYAGENT_SIZE, build_model

    tokenizer = AutoTokenizer.from_pretrained(path)
    folder = tempfile.mkdtemp(prefix="bench-engine-")
    build_model(tokenizer, seed=0, size=TINYAGENT_SIZE).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def timed(make: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    made = make()
    return made, time.perf_counter() - wall, cpu_seconds() - cpu


def measure(name: str, generator: Any, tokenizer: Any, recipe: Recipe, concurrency: int, episodes: int) -> dict:
    cpu = cpu_seconds()
    trajectories, seconds = play(generator, tokenizer, recipe, concurrency, episodes)
    return {"sampler": name, "concurrency": concurrency, "episodes": len(trajectories), "seconds": seconds,
            "cpu_seconds": cpu_seconds() - cpu, "episodes_per_s": len(trajectories) / seconds,
            "sampled_tokens_per_episode": sum(t.policy_tokens for t in trajectories) / len(trajectories)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-model", action="store_true", help="an untrained TinyAgent-sized model")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per measurement (at least the concurrency)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    import vllm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    folder = model_folder(args.random_model, recipe)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    print("starting the engine and loading the stand-in's model", file=sys.stderr, flush=True)
    model, hf_wall, hf_cpu = timed(lambda: AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="sdpa", dtype=torch.float32).eval())
    llm, engine_wall, engine_cpu = timed(lambda: vllm.LLM(model=folder, seed=0, max_model_len=(
        recipe.rollout.max_context_tokens), **ENGINE_SETTINGS))
    start = {"hf": {"seconds": hf_wall, "cpu_seconds": hf_cpu}, "vllm": {"seconds": engine_wall,
                                                                          "cpu_seconds": engine_cpu}}
    rows = []
    for concurrency in args.concurrency:
        episodes = max(args.episodes, concurrency)
        for order in (("hf", "vllm"), ("vllm", "hf")):  # ABBA: each sampler first once
            for name in order:
                print(f"{concurrency} concurrent: {name}", file=sys.stderr, flush=True)
                generator = (HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=concurrency)
                             if name == "hf" else VLLMGenerator(llm, tokenizer.eos_token_id, seed=concurrency))
                rows.append(measure(name, generator, tokenizer, recipe, concurrency, episodes))
    if args.json:
        print(json.dumps({"start": start, "rows": rows}, indent=2))
        return
    print(f"start-up: the engine {engine_wall:.1f} s ({engine_cpu:.1f} s CPU), the stand-in's model {hf_wall:.2f} s: "
          f"{engine_wall / hf_wall:.0f}x")
    print(f"{'concurrent':>10} {'hf ep/s':>8} {'vllm ep/s':>10} {'vllm/hf':>8} {'CPU s/ep vllm/hf':>17} "
          f"{'sampled tok/ep hf, vllm':>24}")
    for concurrency in args.concurrency:
        mine = [row for row in rows if row["concurrency"] == concurrency]
        hf = [row for row in mine if row["sampler"] == "hf"]
        engine = [row for row in mine if row["sampler"] == "vllm"]
        rate = {name: sum(r["episodes"] for r in group) / sum(r["seconds"] for r in group)
                for name, group in (("hf", hf), ("vllm", engine))}
        cpu = {name: sum(r["cpu_seconds"] for r in group) / sum(r["episodes"] for r in group)
               for name, group in (("hf", hf), ("vllm", engine))}
        tokens = {name: sum(r["sampled_tokens_per_episode"] for r in group) / len(group)
                  for name, group in (("hf", hf), ("vllm", engine))}
        print(f"{concurrency:>10} {rate['hf']:>8.2f} {rate['vllm']:>10.2f} {rate['vllm'] / rate['hf']:>7.2f}x "
              f"{cpu['vllm'] / cpu['hf']:>16.2f}x {tokens['hf']:>12.1f}, {tokens['vllm']:.1f}")


if __name__ == "__main__":
    main()
