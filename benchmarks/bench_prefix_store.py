"""The HF sampler's prefix store over long episodes: its peak bytes against the live context, and the cost of a
turn, at 4, 8, 16 and 32 turns of 8 concurrent episodes (a random model of the core's default size; one run).

    python benchmarks/bench_prefix_store.py [--turns 4 8 16 32] [--episodes 8] [--json]

"live context" is each episode's read tokens (prompt and sampled tokens but the last) once, in the store's bytes
per token; the store should hold about that (one entry per conversation), not a copy per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import torch

from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.local_models import build_model, byte_chat_tokenizer
from agentrl_plugins.types import Sampling

SAMPLING = Sampling(temperature=1.0, max_new_tokens=24)


async def episodes(generate: HFGenerator, count: int, turns: int) -> tuple[int, float]:
    """Play ``count`` concurrent episodes of ``turns`` turns; the store's peak bytes and the seconds taken."""
    peak = 0

    async def episode(index: int) -> None:
        nonlocal peak
        g = torch.Generator().manual_seed(index)
        history = torch.randint(7, 200, (300,), generator=g).tolist()
        for _ in range(turns):
            out = await generate(history, SAMPLING)
            peak = max(peak, generate.prefixes.nbytes)
            history = history + out.token_ids + torch.randint(7, 200, (40,), generator=g).tolist()

    start = time.perf_counter()
    await asyncio.gather(*[episode(i) for i in range(count)])
    return peak, time.perf_counter() - start


def measure(turns: int, count: int) -> dict[str, float]:
    tokenizer = byte_chat_tokenizer()
    generate = HFGenerator(build_model(tokenizer, seed=0).eval(), eos_token_id=-1, pad_token_id=0, seed=0)
    peak, seconds = asyncio.run(episodes(generate, count, turns))
    entries = list(generate.prefixes._entries.values())
    per_token = generate.prefixes.nbytes / max(1, sum(len(entry.token_ids) for entry in entries))
    live = count * (300 + turns * SAMPLING.max_new_tokens + (turns - 1) * 40 - 1) * per_token
    return {"turns": turns, "entries": len(entries), "peak_over_live": peak / live, "s_per_turn": seconds / turns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(turns, args.episodes) for turns in args.turns]
    first = rows[0]["s_per_turn"]
    for row in rows:
        row["turn_cost_ratio"] = row["s_per_turn"] / first
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'turns':>5} {'entries':>7} {'peak/live':>9} {'s/turn':>7} {'turn cost vs first':>18}")
    for row in rows:
        print(f"{row['turns']:>5} {row['entries']:>7} {row['peak_over_live']:>9.2f} {row['s_per_turn']:>7.3f} "
              f"{row['turn_cost_ratio']:>17.2f}x")


if __name__ == "__main__":
    main()
