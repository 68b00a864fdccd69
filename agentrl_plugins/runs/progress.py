"""Recording one finished step the same way in every framework: its row, the plugins' hook, a progress line."""

from __future__ import annotations

import sys
from typing import Any

from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.mismatch_gate import check_mismatch
from agentrl_plugins.runs.rundir import RunDir


def record_step(run: RunDir, row: StepMetrics, hooks: Any) -> None:
    """Append ``row`` to the run's ``metrics.jsonl``, call ``agentrl_step_end``, print the step's figures and
    check the recipe's mismatch gate (:func:`~agentrl_plugins.runs.mismatch_gate.check_mismatch`)."""
    run.append_metrics(row)
    hooks.agentrl_step_end(step=row.step, metrics=row.to_dict())
    held = "" if row.heldout_pass1 is None else f"  held-out pass@1 {row.heldout_pass1:.3f}"
    reward = "" if row.train_reward is None else f"  train reward {row.train_reward:.3f}"
    pearson = "" if row.mismatch_pearson is None else f"  sampler/learner r {row.mismatch_pearson:.6f}"
    print(f"step {row.step}{reward}{held}{pearson}", file=sys.stderr, flush=True)
    if row.train_reward is not None and row.policy_tokens == 0:
        print(f"step {row.step}: no loss token, so no gradient: every episode was compact-filtered (a policy that "
              "only ever runs out of turns or context gets no signal to leave that state)", file=sys.stderr,
              flush=True)
    if row.mismatch_pearson is not None:
        check_mismatch(row, run.load_recipe().mismatch)
