"""Fixtures for the OpenRLHF adapter's tests, which call OpenRLHF 0.11.2's own code on a CPU.

flash-attn cannot be installed without CUDA (and vLLM only as its CPU build); whichever is missing, the CPU
backend's shim of it (``agentrl_openrlhf/cpu/shims``: only what OpenRLHF imports at module top) is appended
to ``sys.path``, and Ray workers get it through ``PYTHONPATH``. ``FakeLLMEngine`` stands in for OpenRLHF's vLLM
rollout actor: a tiny Hugging Face model scores (or samples) every reply.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.types import Sampling

from agentrl_openrlhf.cpu import SHIM_PATHS, use_shims_where_missing
from agentrl_openrlhf.recipe_env import RECIPE_ENV
from agentrl_tinyagent.model import build_model
from agentrl_tinyagent.tokenizer import build_tokenizer
from bugfix_gym.families import FAMILIES

use_shims_where_missing()
SHIMMED = [name for name, folder in SHIM_PATHS.items() if str(folder) in sys.path]
ISSUES = {family.name: family.issue for family in FAMILIES}
SOLVE = ["<tool>read</tool>", "<tool>edit swap_minmax</tool>", "<tool>submit</tool>"]
HACK = ["<tool>edit hardcode_tests</tool>", "<tool>submit</tool>"]
STALL = ["<tool>test</tool>"]
MAX_LEN = 1024
SMALL = {"rollout.group_size": 4, "rollout.tasks_per_step": 2, "rollout.max_turns": 4,
         "rollout.max_context_tokens": 1024, "train.steps": 2, "train.eval_every": 1,
         "train.eval_episodes_per_task": 1}


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CUDA, vLLM and flash-attn (a real OpenRLHF run)")
    config.addinivalue_line("filterwarnings", "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:Tip. In future versions of Ray:FutureWarning")


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer):
    return build_model(tokenizer, seed=0).eval()


@pytest.fixture
def worker_env() -> dict[str, str]:
    """Environment variables that give Ray workers the shim modules."""
    return {"PYTHONPATH": os.pathsep.join(str(SHIM_PATHS[name]) for name in SHIMMED)} if SHIMMED else {}


@pytest.fixture
def use_recipe(tmp_path, monkeypatch):
    """``use_recipe(overrides)``: the laptop deepswe_grpopp recipe with overrides, in a run folder's
    ``recipe.toml`` named by AGENTRL_OPENRLHF_RECIPE (as ``agentrl run`` does)."""

    def use(overrides: dict[str, Any] | None = None, name: str = "deepswe_grpopp"):
        recipe = load_recipe(name, {**SMALL, **(overrides or {})}, "laptop")
        run = RunDir(tmp_path / f"run{len(list(tmp_path.glob('run*')))}")
        run.create(recipe, "openrlhf")
        monkeypatch.setenv(RECIPE_ENV, str(run.recipe_file))
        return recipe

    return use


@dataclass
class FakeLogprob:
    logprob: float


@dataclass
class FakeCompletion:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[dict[int, FakeLogprob]]


@dataclass
class FakeRequestOutput:
    outputs: list[FakeCompletion]


@dataclass
class FakeLLMEngine:
    """A FAKE of OpenRLHF's vLLM rollout actor: ``generate`` answers like vLLM's ``RequestOutput``.

    The i-th episode started for a task replays ``scripts[task][i]`` (one message per turn, then
    EOS); tasks without a script sample from the model (TinyAgent's batched ``HFGenerator``).
    Log-probs are always the model's at the requested temperature. Every call is kept in ``calls``
    as ``(prompt ids, reply ids, log-probs)``.
    """

    model: Any
    tokenizer: Any
    scripts: dict[str, list[list[str]]] = field(default_factory=dict)
    seed: int = 0
    calls: list[tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]] = field(default_factory=list)
    started: Counter = field(default_factory=Counter)
    episodes: dict[tuple[int, ...], int] = field(default_factory=dict)

    def __post_init__(self):
        self.assistant = self.tokenizer.convert_tokens_to_ids("<|assistant|>")
        self.sampler = HFGenerator(self.model, self.tokenizer.eos_token_id, self.tokenizer.pad_token_id, self.seed)

    def _episode(self, token_ids: list[int], task: str) -> int:
        for history, index in self.episodes.items():
            if tuple(token_ids[: len(history)]) == history:
                return index
        self.started[task] += 1
        return self.started[task] - 1

    def _logits(self, ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return self.model(torch.tensor([ids])).logits[0].float()

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None) -> FakeRequestOutput:
        prompt = list(prompt_token_ids)
        text = self.tokenizer.decode(prompt, skip_special_tokens=True)
        task = next((name for name in self.scripts if ISSUES[name] in text), None)
        if task is None:
            sampling = Sampling(sampling_params.temperature, sampling_params.top_p, sampling_params.top_k,
                                sampling_params.max_tokens)
            ids = (await self.sampler(prompt, sampling)).token_ids
        else:
            index = self._episode(prompt, task)
            script = self.scripts[task][index % len(self.scripts[task])]
            turn = prompt.count(self.assistant) - 1
            message = script[min(turn, len(script) - 1)]
            ids = self.tokenizer.encode(message, add_special_tokens=False) + [self.tokenizer.eos_token_id]
            ids = ids[: sampling_params.max_tokens]
            self.episodes[tuple(prompt + ids)] = index
        logits = self._logits(prompt + ids)[len(prompt) - 1: -1] / sampling_params.temperature
        logprobs = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()
        self.calls.append((tuple(prompt), tuple(ids), tuple(logprobs)))
        finish = "length" if len(ids) == sampling_params.max_tokens and ids[-1] != self.tokenizer.eos_token_id \
            else "stop"
        return FakeRequestOutput([FakeCompletion(ids, self.tokenizer.decode(ids), finish,
                                                 [{t: FakeLogprob(lp)} for t, lp in zip(ids, logprobs)])])


def engine_spans(engine: FakeLLMEngine, tokens: list[int]) -> dict[tuple[int, int], tuple[float, ...]]:
    """Spans of ``tokens`` that some engine call produced right after exactly the tokens before them."""
    spans = {}
    for prompt, reply, logprobs in engine.calls:
        start, end = len(prompt), len(prompt) + len(reply)
        if tuple(tokens[:start]) == prompt and tuple(tokens[start:end]) == reply:
            spans[(start, end)] = logprobs
    return spans


def rollout_params(temperature: float = 1.0):
    """The SamplingParams ``SamplesGenerator._dispatch_prompts_to_vllm`` builds (no correction, no max_new_tokens)."""
    from vllm import SamplingParams

    return SamplingParams(temperature=temperature, top_p=1.0, top_k=-1, max_tokens=None, min_tokens=1,
                          skip_special_tokens=False, logprobs=None)


async def rollout(engine: Any, tokenizer: Any, task: str, samples: int, temperature: float = 1.0) -> list[dict]:
    """OpenRLHF's ``RolloutRayActor.generate_responses`` with the shipped executor, answered by ``engine``."""
    from openrlhf.trainer.ray import vllm_engine

    from agentrl_openrlhf.shipped import AGENT_EXECUTOR

    actor_class = vllm_engine.RolloutRayActor.__ray_metadata__.modified_class
    actor = SimpleNamespace(executor=vllm_engine._load_agent_executor(str(AGENT_EXECUTOR)), generate=engine.generate)
    return await actor_class.generate_responses(actor, prompt=f"task {task}", label=task,
                                                sampling_params=rollout_params(temperature), max_length=MAX_LEN,
                                                hf_tokenizer=tokenizer, num_samples=samples)


def experience_of(response: dict) -> Any:
    """``SamplesGenerator``'s ``Experience`` for one executor response."""
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    return SamplesGenerator._process_response_into_experience(None, response, max_len=MAX_LEN)


class Trapped(Exception):
    """Raised where OpenRLHF's CLI would start training, carrying its parsed and validated arguments."""

    def __init__(self, parsed: Any):
        super().__init__("train_ppo_ray stopped before training")
        self.parsed = parsed


def parse_openrlhf_cli(argv: list[str], monkeypatch) -> SimpleNamespace:
    """Run ``python -m openrlhf.cli.train_ppo_ray ARGV``'s own parsing and validation; stop at ``get_strategy``."""
    import openrlhf.utils
    import ray

    def trap(args):
        raise Trapped(args)

    monkeypatch.setattr(openrlhf.utils, "get_strategy", trap)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(sys, "argv", ["train_ppo_ray", *argv])
    with pytest.raises(Trapped) as caught:
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    return caught.value.parsed


def flags_of(command: list[str]) -> list[str]:
    """The arguments after ``-m openrlhf.cli.train_ppo_ray``."""
    return command[command.index("openrlhf.cli.train_ppo_ray") + 1:]
