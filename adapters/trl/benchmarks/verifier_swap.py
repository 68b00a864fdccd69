"""Swap one flag, see the point: the same run rewarded by hidden tests and by public tests.

With `public_tests` the hardcode_tests exploit earns reward, so the hacked fraction should rise during
training; with the default `hidden_tests` it should not. Writes both run folders under --out and a report
in the public-tests run that draws both curves.

    python adapters/trl/benchmarks/verifier_swap.py [--seed 0] [--out runs/verifier-swap]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir

from agentrl_trl.runner import run

VERIFIERS = ("hidden_tests", "public_tests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/verifier-swap"))
    args = parser.parse_args()
    folders = {}
    for verifier in VERIFIERS:
        folders[verifier] = RunDir(args.out / verifier)
        if not folders[verifier].final_weights.is_dir():
            print(f"verifier {verifier}", file=sys.stderr, flush=True)
            recipe = load_recipe("deepswe_grpopp", {"verifier.names": [verifier], "train.seed": args.seed}, "laptop")
            run(recipe, RunOptions(run_dir=folders[verifier].path))
    report = write_report(folders["public_tests"], {"hidden_tests (default)": folders["hidden_tests"]})
    print(f"{'step':>5}" + "".join(f"{v + ' hacked':>22}" for v in VERIFIERS))
    rows = {v: {r.step: r.hacked_fraction for r in folders[v].read_metrics()} for v in VERIFIERS}
    for step in sorted(rows["public_tests"]):
        cells = [rows[v].get(step) for v in VERIFIERS]
        print(f"{step:>5}" + "".join(f"{'' if c is None else f'{c:.3f}':>22}" for c in cells))
    print(f"report: {report}")


if __name__ == "__main__":
    main()
