"""Batched generation: forward passes and seconds for one training step's episodes, batched vs one at a time.

A step of the laptop recipe plays tasks_per_step x group_size episodes concurrently. With batching, the
concurrent generation calls share forward passes, so the step costs about as many passes as its longest
episode has tokens; one at a time, it costs the sum over all episodes. Both runs use the same model,
seeds and episodes, in one process; the ratios are the result (absolute seconds on a shared machine are noisy).

    python adapters/trl/benchmarks/bench_batching.py [--random-model] [--steps 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import torch

from agentrl_plugins.environment import build_environment
from agentrl_plugins.episode import run_episodes
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.types import Limits, Sampling
from agentrl_plugins.verifiers import build_verifier


def load(random_model: bool, recipe):
    """The recipe's model (through the model registry), or a random model of the core's default size with its
    tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentrl_plugins.local_models import build_model
    from agentrl_plugins.models import run_model

    path = run_model(recipe, None, prepare=True)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if random_model:
        return build_model(tokenizer, 0), tokenizer
    return AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa"), tokenizer


def play(model, tokenizer, recipe, max_batch: int, seed: int) -> dict:
    manager = get_plugin_manager()
    env = build_environment(recipe.environment, manager)
    tasks = env.tasks(recipe.environment.train_split)[: recipe.rollout.tasks_per_step]
    generator = HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=seed, max_batch=max_batch)
    r = recipe.rollout
    started = time.perf_counter()
    trajectories = asyncio.run(run_episodes(
        env, tasks, generator, tokenizer, Limits(r.max_turns, r.max_context_tokens, r.max_new_tokens_per_turn),
        group_size=r.group_size, verifier=build_verifier(recipe.verifier.names, recipe.verifier.combine, manager),
        sampling=Sampling(r.temperature, r.top_p, r.top_k, r.max_new_tokens_per_turn)))
    seconds = time.perf_counter() - started
    env.close()
    longest = max(sum(e - s for s, e in t.turn_spans) for t in trajectories)
    return {"episodes": len(trajectories), "forward_passes": generator.forward_passes, "seconds": seconds,
            "policy_tokens": sum(t.policy_tokens for t in trajectories), "longest_episode_tokens": longest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-model", action="store_true",
                        help="an untrained model (local_models.ModelSize defaults) with the recipe model's tokenizer")
    parser.add_argument("--steps", type=int, default=2, help="steps (seeds) to average over")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    model, tokenizer = load(args.random_model, recipe)
    model.eval()
    results = {"batched": [], "one_at_a_time": []}
    for step in range(args.steps):
        for name, max_batch in (("batched", 64), ("one_at_a_time", 1)):
            print(f"step {step}: {name}", file=sys.stderr, flush=True)
            results[name].append(play(model, tokenizer, recipe, max_batch, seed=step))
    summary = {name: {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]} for name, rows in results.items()}
    summary["forward_pass_ratio"] = summary["one_at_a_time"]["forward_passes"] / summary["batched"]["forward_passes"]
    summary["speedup"] = summary["one_at_a_time"]["seconds"] / summary["batched"]["seconds"]
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{'':16}{'episodes':>10}{'fwd passes':>12}{'seconds':>10}{'policy tok':>12}{'longest ep':>12}")
    for name in ("batched", "one_at_a_time"):
        s = summary[name]
        print(f"{name:16}{s['episodes']:>10.0f}{s['forward_passes']:>12.0f}{s['seconds']:>10.2f}"
              f"{s['policy_tokens']:>12.0f}{s['longest_episode_tokens']:>12.0f}")
    print(f"forward passes, one at a time / batched: {summary['forward_pass_ratio']:.1f}x")
    print(f"seconds, one at a time / batched:        {summary['speedup']:.1f}x")


if __name__ == "__main__":
    main()
