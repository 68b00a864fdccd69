"""Fixtures for the verl adapter's tests: TinyAgent, verl's composed Hydra config, and a fake rollout server.

The fake stands in for verl's ``server_manager`` (the real one needs a GPU and
vLLM): it answers ``generate(request_id, prompt_ids, sampling_params)`` with a
``TokenOutput`` whose log-probs come from a small Hugging Face model.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig
from verl import DataProto
from verl.workers.rollout.replica import TokenOutput

from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir, write_recipe_file

from agentrl_tinyagent.model import build_model
from agentrl_tinyagent.tokenizer import build_tokenizer
from agentrl_verl.config import LaunchPaths, command, describe
from bugfix_gym.families import FAMILIES

ISSUES = {family.name: family.issue for family in FAMILIES}


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and vLLM (a real verl training run)")


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer):
    return build_model(tokenizer, seed=0).eval()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, model, tokenizer) -> Path:
    path = tmp_path_factory.mktemp("tinyagent")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


ONE_RANK_SETTINGS = {"train.steps": 2, "train.eval_every": 1, "train.eval_episodes_per_task": 1,
                     "rollout.group_size": 4, "rollout.tasks_per_step": 2, "filtering.compact": "false",
                     "loss.entropy_coef": 0.01}
"""Two steps, each evaluated and checkpointed; the entropy bonus on unfiltered episodes gives a fresh TinyAgent a
gradient."""


def cpu_run_env(tmp: Path) -> dict[str, str]:
    """The environment of a CPU ``agentrl run``: one thread per process, a cache of its own, this venv's scripts,
    no cluster of the caller's."""
    env = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    return {**env, "OMP_NUM_THREADS": "1", "AGENTRL_CACHE": str(tmp / "cache"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def one_rank_command(model_dir: Path, *words: str) -> list[str]:
    """``agentrl run`` of the recipe on one CPU rank with :data:`ONE_RANK_SETTINGS`, then ``words``."""
    return [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "verl", "--profile",
            "laptop", "--model", str(model_dir),
            *[arg for key, value in ONE_RANK_SETTINGS.items() for arg in ("-o", f"{key}={value}")], *words]


@pytest.fixture(scope="session")
def one_rank_run(tmp_path_factory, model_dir) -> RunDir:
    """A whole one-rank verl run never stopped, shared by the tests that hold another run to it (kill and resume,
    two ranks)."""
    tmp = tmp_path_factory.mktemp("one-rank")
    run = RunDir(tmp / "run")
    done = subprocess.run(one_rank_command(model_dir, "--out", str(run.path)), env=cpu_run_env(tmp),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return run


def verl_config(recipe: Recipe, paths: LaunchPaths, extra: Sequence[str] = ()) -> DictConfig:
    """verl's own ``ppo_trainer`` config composed with the adapter's overrides for ``recipe``; its workers read
    the run folder's ``recipe.toml`` (written here, under ``paths.data_dir`` unless ``paths`` names a run folder)."""
    if paths.run_dir is None:
        paths = dataclasses.replace(paths, run_dir=paths.data_dir / "run")
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    write_recipe_file(paths.run_dir / "recipe.toml", recipe)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=command(describe(recipe, paths).native)[3:] + list(extra))


def model_logprobs(model: Any, prefix: Sequence[int], ids: Sequence[int], temperature: float = 1.0) -> list[float]:
    """log_softmax(logits / T) of each of ``ids`` after ``prefix``, teacher-forced."""
    with torch.no_grad():
        logits = model(torch.tensor([list(prefix) + list(ids)])).logits[0, len(prefix) - 1:-1].float()
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()


class FakeServerManager:
    """A fake of verl's server manager: samples from the HF model, or plays ``scripts`` (texts per turn by family)."""

    def __init__(self, model: Any, tokenizer: Any, scripts: dict[str, list[str]] | None = None, seed: int = 0):
        self.model, self.tokenizer, self.scripts = model, tokenizer, scripts
        self.generator = torch.Generator().manual_seed(seed)
        self.assistant = tokenizer.convert_tokens_to_ids("<|assistant|>")
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> TokenOutput:
        ids = self.scripted(prompt_ids) if self.scripts else self.sampled(prompt_ids, sampling_params)
        ids = ids[: sampling_params["max_tokens"]]
        logprobs = model_logprobs(self.model, prompt_ids, ids, sampling_params["temperature"])
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "token_ids": ids,
                           "log_probs": logprobs, "sampling_params": dict(sampling_params)})
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed")

    def scripted(self, prompt_ids: list[int]) -> list[int]:
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=True)
        family = next(name for name, issue in ISSUES.items() if issue in text)
        script = self.scripts[family]
        turn = prompt_ids.count(self.assistant) - 1
        return self.tokenizer.encode(script[min(turn, len(script) - 1)], add_special_tokens=False) + [
            self.tokenizer.eos_token_id]

    def sampled(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        ids: list[int] = []
        with torch.no_grad():
            for _ in range(sampling_params["max_tokens"]):
                logits = self.model(torch.tensor([prompt_ids + ids])).logits[0, -1].float()
                probs = torch.softmax(logits / sampling_params["temperature"], -1)
                ids.append(int(torch.multinomial(probs, 1, generator=self.generator)))
                if ids[-1] == self.tokenizer.eos_token_id:
                    break
        return ids


def objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-D object array (numpy would turn equal-length lists into a 2-D one)."""
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


def rows_batch(rows: list[dict[str, Any]]) -> DataProto:
    """The DataProto verl's trainer hands the agent-loop worker for dataset ``rows`` (RLHFDataset fields)."""
    return DataProto.from_single_dict({
        "dummy_tensor": torch.zeros(len(rows), 1, dtype=torch.uint8),
        **{key: objects([row[key] for row in rows]) for key in rows[0]},
        "raw_prompt": objects([row["prompt"] for row in rows]),
        "index": np.arange(len(rows)),
    })
