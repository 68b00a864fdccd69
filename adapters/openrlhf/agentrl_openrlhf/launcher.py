"""``agentrl run RECIPE --framework openrlhf``: a run folder with the recipe and datasets, then ``train_ppo_ray``.

OpenRLHF's own command line is launched unmodified; the recipe reaches its processes through
``AGENTRL_OPENRLHF_RECIPE`` (the run folder's ``recipe.toml``) and the runtime-env hook.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_openrlhf.config import RunPaths
from agentrl_openrlhf.dataset import dataset_rows, write_jsonl

FRAMEWORK = "openrlhf"


def run_paths(run: RunDir, model: Path) -> RunPaths:
    """Absolute paths, since OpenRLHF's Ray workers need not share the launcher's working directory."""
    root = RunDir(run.path.resolve())
    return RunPaths(recipe=root.recipe_file, train_data=root.path / "prompts.jsonl",
                    eval_data=root.path / "eval_prompts.jsonl", checkpoints=root.checkpoints,
                    final=root.final_weights, model=model)


def model_dir(model: str | None, build: bool) -> Path:
    """``--model`` (a local Hugging Face folder) or TinyAgent's cached folder, built first when ``build``."""
    if model is not None:
        if not Path(model).is_dir():
            raise AgentRLError(f"--model {model}: not a local model folder (there is no model hub here)")
        return Path(model).resolve()
    from agentrl_plugins.tinyagent.warmstart import model_path, warm_start

    if not build:
        return model_path(0)
    try:
        return warm_start(0)
    except ImportError as error:
        raise AgentRLError(f"TinyAgent is not built yet and building it needs TRL ({error}): build it once from the "
                           "TRL environment (agentrl run deepswe_grpopp), or pass --model DIR") from None


def launch(recipe: Recipe, run: RunDir, paths: RunPaths, command: list[str]) -> Path:
    """Write the run folder and the datasets, run the command, return the folder."""
    run.create(recipe, FRAMEWORK, {"model": str(paths.model), "model_path": str(paths.model), "command": command})
    env = get_plugin_manager().get("environment", recipe.environment.name).factory()
    write_jsonl(dataset_rows(env, recipe, recipe.environment.train_split), paths.train_data)
    write_jsonl(dataset_rows(env, recipe, recipe.environment.eval_split), paths.eval_data)
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise AgentRLError(f"OpenRLHF exited with status {result.returncode}; the run folder is {run.path}")
    return run.path
