"""The HF sampler on the laptop recipe's episodes: prompt tokens read, forward passes and episodes/s at 1, 8,
32 and 64 concurrent episodes, with continuous batching and cache reuse against a static batch that reads
every prompt whole (the sampler before reuse), interleaved in one run.

Both samplers run the same model, tasks and seeds; their episodes are compared token for token. The ratios
are the result (absolute seconds on a shared machine are noisy).

    python benchmarks/bench_sampler.py [--random-model] [--concurrency 1 8 32 64] [--episodes 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import torch

from agentrl_plugins.environment import build_environment
from agentrl_plugins.episode import run_episodes
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe import Recipe, load_recipe
from agentrl_plugins.types import Limits, Sampling
from agentrl_plugins.verifiers import build_verifier

SAMPLERS = {"static, no reuse": {"refill": False, "prefix_cache_bytes": 0}, "continuous + reuse": {}}


def load(random_model: bool, recipe: Recipe) -> tuple[Any, Any]:
    """The recipe's model (through the model registry), or a random model of the core's default size with its
    tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentrl_plugins.local_models import build_model
    from agentrl_plugins.models import run_model

    path = run_model(recipe, None, prepare=True)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if random_model:
        return build_model(tokenizer, 0).eval(), tokenizer
    return AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa").eval(), tokenizer


def play(generator: Any, tokenizer: Any, recipe: Recipe, concurrency: int, episodes: int) -> tuple[list[Any], float]:
    """``episodes`` episodes sampled by ``generator``, ``concurrency`` at a time (groups of up to the recipe's group
    size); their trajectories and the seconds they took."""
    manager = get_plugin_manager()
    env = build_environment(recipe.environment, manager)
    r = recipe.rollout
    group = min(r.group_size, concurrency)
    tasks = env.tasks(recipe.environment.train_split)
    verifier = build_verifier(recipe.verifier.names, recipe.verifier.combine, manager)
    limits = Limits(r.max_turns, r.max_context_tokens, r.max_new_tokens_per_turn)
    sampling = Sampling(r.temperature, r.top_p, r.top_k, r.max_new_tokens_per_turn)
    trajectories = []
    started = time.perf_counter()
    for first in range(0, episodes, concurrency):
        count = min(concurrency, episodes - first) // group
        chosen = [tasks[(first // group + i) % len(tasks)] for i in range(count)]
        trajectories += asyncio.run(run_episodes(env, chosen, generator, tokenizer, limits, group_size=group,
                                                 verifier=verifier, sampling=sampling))
    seconds = time.perf_counter() - started
    env.close()
    return trajectories, seconds


def sample(model: Any, tokenizer: Any, recipe: Recipe, concurrency: int, episodes: int, options: dict,
           seed: int) -> dict:
    """:func:`play` with the HF sampler built with ``options``, and the sampler's own counts."""
    generator = HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=seed, **options)
    trajectories, seconds = play(generator, tokenizer, recipe, concurrency, episodes)
    prompt_tokens = generator.prefill_tokens + generator.reused_tokens
    return {"episodes": len(trajectories), "seconds": seconds, "episodes_per_s": len(trajectories) / seconds,
            "forward_passes": generator.forward_passes, "prefill_tokens": generator.prefill_tokens,
            "prompt_tokens": prompt_tokens, "sampled_tokens": sum(t.policy_tokens for t in trajectories),
            "responses": [t.response_ids for t in trajectories]}


def identical_episodes(first: list[list[int]], second: list[list[int]], group: int) -> int:
    """Episodes of ``first`` with an identical episode in the same group of ``second``. Within a group the
    members are exchangeable: two members whose histories are identical send identical prompts, and which
    of them draws from which prompt occurrence's generator follows the order their requests arrive in."""
    same = 0
    for start in range(0, len(first), group):
        others = sorted(map(tuple, second[start:start + group]))
        for episode in map(tuple, first[start:start + group]):
            if episode in others:
                others.remove(episode)
                same += 1
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-model", action="store_true",
                        help="an untrained model (local_models.ModelSize defaults) with the recipe model's tokenizer")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per measurement (at least the concurrency)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    model, tokenizer = load(args.random_model, recipe)
    rows = []
    for concurrency in args.concurrency:
        episodes = max(args.episodes, concurrency)
        results = {}
        for name, options in SAMPLERS.items():
            print(f"{concurrency} concurrent: {name}", file=sys.stderr, flush=True)
            results[name] = sample(model, tokenizer, recipe, concurrency, episodes, options, seed=concurrency)
        base, new = results["static, no reuse"], results["continuous + reuse"]
        same = identical_episodes(base.pop("responses"), new.pop("responses"), min(recipe.rollout.group_size,
                                                                                   concurrency))
        rows.append({"concurrency": concurrency, "episodes": episodes, "identical_episodes": same,
                     "static": base, "continuous": new,
                     "prefill_token_ratio": base["prefill_tokens"] / new["prefill_tokens"],
                     "episodes_per_s_ratio": new["episodes_per_s"] / base["episodes_per_s"]})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'concurrent':>10} {'sampler':>20} {'ep/s':>7} {'fwd':>6} {'prompt tok/ep':>14} {'read tok/ep':>12} "
          f"{'sampled tok/ep':>15}")
    for row in rows:
        for name, key in (("static, no reuse", "static"), ("continuous + reuse", "continuous")):
            s, n = row[key], row["episodes"]
            print(f"{row['concurrency']:>10} {name:>20} {s['episodes_per_s']:>7.2f} {s['forward_passes']:>6} "
                  f"{s['prompt_tokens'] / n:>14.0f} {s['prefill_tokens'] / n:>12.0f} {s['sampled_tokens'] / n:>15.1f}")
        print(f"{'':>10} {'ratio':>20} {row['episodes_per_s_ratio']:>6.2f}x {'':>6} {'':>14} "
              f"{row['prefill_token_ratio']:>11.1f}x  identical episodes {row['identical_episodes']}/{row['episodes']}")


if __name__ == "__main__":
    main()
