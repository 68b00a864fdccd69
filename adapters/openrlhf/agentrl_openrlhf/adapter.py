"""The ``openrlhf`` adapter: describe a recipe as ``train_ppo_ray`` flags, or launch it (GPU or CPU backend)."""

from __future__ import annotations

from pathlib import Path

from agentrl_plugins.adapter import FrameworkConfig, RunOptions
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.models import run_model
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_openrlhf.config import describe
from agentrl_openrlhf.cpu import choose_backend
from agentrl_openrlhf.launcher import FRAMEWORK, check_loggers, launch, plan, print_plan, resume, run_paths


class OpenRLHFAdapter:
    def describe(self, recipe: Recipe) -> FrameworkConfig:
        """The configuration for a run folder ``runs/<recipe>-openrlhf-seed<seed>`` and the recipe's model."""
        run = RunDir(Path("runs") / f"{recipe.name}-{FRAMEWORK}-seed{recipe.train.seed}")
        return describe(recipe, run_paths(run, run_model(recipe, None, prepare=False)), choose_backend())

    def run(self, recipe: Recipe, options: RunOptions) -> Path | None:
        check_loggers(options.report_to)
        if options.resume is not None:
            given = [flag for flag, value in (("--out", options.run_dir), ("--model", options.model),
                                              ("--ranks", options.ranks), ("--report-to", options.report_to),
                                              ("--nodes", options.nodes != 1)) if value]
            if given:
                raise AgentRLError(f"--resume runs the folder's own OpenRLHF command again (its model, ranks, nodes "
                                   f"and loggers); leave out {', '.join(given)}")
            return resume(RunDir(options.resume), options.dry_run)
        run, paths, command = plan(recipe, options, prepare_model=not options.dry_run)
        if options.dry_run:
            print_plan(options, run, command)
            return None
        return launch(recipe, run, paths, command)
