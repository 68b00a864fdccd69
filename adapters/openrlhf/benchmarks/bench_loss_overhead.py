"""The injected policy loss against OpenRLHF's own: ``PolicyLoss.forward`` plus backward, same math, B rows.

The recipe (``deepswe_grpopp`` with token-mean aggregation, the one OpenRLHF has natively: clip-higher, dual
clip 3.0) runs through the adapter's patched forward and through OpenRLHF's unpatched one on the same inputs,
interleaved, each going first in every other pair (the second call of a pair finds warmer caches); the losses
are checked equal first. The ratio is the median of each pair's ratio (two calls a millisecond apart see the same
machine, where medians taken apart drift with it). Prints the time ratio injected / native per batch size (the
goal is at most 1.05x).

    python adapters/openrlhf/benchmarks/bench_loss_overhead.py [--rows 256 1024 4096] [--tokens 128] [--repeats 50]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.recipe import load_recipe

from agentrl_openrlhf.cpu import use_shims_where_missing
from agentrl_openrlhf.patches import policy_loss_forward


def inputs(rows: int, tokens: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, tokens, generator=g) * 3
    lengths = torch.randint(tokens // 4, tokens + 1, (rows,), generator=g)
    mask = (torch.arange(tokens)[None, :] < lengths[:, None]).float()
    return {"log_probs": old + 0.3 * torch.randn(rows, tokens, generator=g), "old_log_probs": old,
            "advantages": torch.randn(rows, 1, generator=g).expand(rows, tokens).contiguous(), "action_mask": mask}


def timed(forward, batch: dict[str, torch.Tensor], tokens: float) -> tuple[float, torch.Tensor]:
    log_probs = batch["log_probs"].clone().requires_grad_()
    started = time.perf_counter()
    loss = forward(log_probs, batch["old_log_probs"], batch["advantages"], batch["action_mask"],
                   batch_num_tokens=tokens)[0]
    loss.backward()
    return time.perf_counter() - started, loss.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = parser.parse_args()
    torch.set_num_threads(2)
    use_shims_where_missing()
    from openrlhf.models.loss import PolicyLoss

    recipe = load_recipe("deepswe_grpopp", {"loss.aggregation": "token-mean"}, "laptop")
    loss = recipe.loss
    native = PolicyLoss(clip_eps_low=loss.clip_low, clip_eps_high=loss.clip_high, dual_clip=loss.clip_c)
    injected = PolicyLoss(clip_eps_low=loss.clip_low, clip_eps_high=loss.clip_high, dual_clip=loss.clip_c)
    injected.forward = types.MethodType(policy_loss_forward(RecipeAlgorithm.from_recipe(recipe)), injected)
    figures = []
    for rows in args.rows:
        batch = inputs(rows, args.tokens, seed=rows)
        tokens = float(batch["action_mask"].sum())
        _, expected = timed(native.forward, batch, tokens)
        _, got = timed(injected.forward, batch, tokens)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-7)  # float32 sums in another order
        times: dict[str, list[float]] = {"native": [], "injected": []}
        forwards = {"native": native.forward, "injected": injected.forward}
        for repeat in range(args.repeats):
            for name in ("native", "injected") if repeat % 2 == 0 else ("injected", "native"):
                times[name].append(timed(forwards[name], batch, tokens)[0])
        native_ms, injected_ms = (1e3 * statistics.median(times[name]) for name in ("native", "injected"))
        pairs = [mine / theirs for mine, theirs in zip(times["injected"], times["native"])]
        figures.append({"rows": rows, "native_ms": native_ms, "injected_ms": injected_ms,
                        "ratio": statistics.median(pairs)})
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{'rows':>6} {'native ms':>10} {'injected ms':>12} {'ratio':>7}")
    for f in figures:
        print(f"{f['rows']:>6} {f['native_ms']:>10.2f} {f['injected_ms']:>12.2f} {f['ratio']:>6.2f}x")


if __name__ == "__main__":
    main()
