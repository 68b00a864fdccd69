"""``agentrl run RECIPE --framework openrlhf``: a run folder with the recipe and datasets, then ``train_ppo_ray``.

OpenRLHF's own command line is launched unmodified; the recipe and the run folder reach its
processes through ``AGENTRL_OPENRLHF_RECIPE`` / ``AGENTRL_OPENRLHF_RUN_DIR`` and the runtime-env
hook, which writes ``metrics.jsonl`` as the run goes; the report is written when it ends.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentrl_plugins.environment import build_environment
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir

from agentrl_openrlhf.config import RunPaths
from agentrl_openrlhf.dataset import dataset_rows, write_jsonl

FRAMEWORK = "openrlhf"


def run_paths(run: RunDir, model: Path) -> RunPaths:
    """Absolute paths, since OpenRLHF's Ray workers need not share the launcher's working directory."""
    root = RunDir(run.path.resolve())
    return RunPaths(folder=root.path, recipe=root.recipe_file, train_data=root.path / "prompts.jsonl",
                    eval_data=root.path / "eval_prompts.jsonl", checkpoints=root.checkpoints,
                    final=root.final_weights, model=model)


def launch(recipe: Recipe, run: RunDir, paths: RunPaths, command: list[str]) -> Path:
    """Write the run folder and the datasets, run the command, write the report; return the folder."""
    run.create(recipe, FRAMEWORK, {"model": str(paths.model), "model_path": str(paths.model), "command": command})
    env = build_environment(recipe.environment)
    write_jsonl(dataset_rows(env, recipe, recipe.environment.train_split), paths.train_data)
    write_jsonl(dataset_rows(env, recipe, recipe.environment.eval_split), paths.eval_data)
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise AgentRLError(f"OpenRLHF exited with status {result.returncode}; the run folder is {run.path}")
    if run.read_metrics():
        print(f"run folder: {run.path}\nreport: {write_report(run)}", file=sys.stderr)
    return run.path
