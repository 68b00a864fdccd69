"""Fixtures for the TRL adapter's tests: TinyAgent's tokenizer, a small random model, scripted episodes."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
import torch

from agentrl_plugins.types import Generation, Sampling

from agentrl_tinyagent.model import build_model
from agentrl_tinyagent.tokenizer import build_tokenizer
from bugfix_gym.families import FAMILIES

ISSUES = {family.name: family.issue for family in FAMILIES}


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture
def model(tokenizer):
    return build_model(tokenizer, seed=0)


class ScriptedEpisodes:
    """A stand-in sampler that plays fixed scripts per (family, episode in group) for exact loss tests.

    It reports as sampler log-probs the model's own log-probs plus ``logprob_offset``, so a test
    can inject a known sampler/learner mismatch: ratio = exp(-logprob_offset).
    """

    def __init__(self, model: Any, tokenizer: Any, scripts: dict[str, list[list[str]]], logprob_offset: float = 0.0,
                 temperature: float = 1.0):
        self.model, self.tokenizer, self.scripts = model, tokenizer, scripts
        self.offset, self.temperature = logprob_offset, temperature
        self.seen: Counter[str] = Counter()
        self.histories: dict[tuple[int, ...], int] = {}
        self.assistant = tokenizer.convert_tokens_to_ids("<|assistant|>")

    def _episode(self, token_ids: list[int], family: str) -> int:
        for history, index in self.histories.items():
            if tuple(token_ids[: len(history)]) == history:
                return index
        index = self.seen[family]
        self.seen[family] += 1
        return index

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        family = next(name for name, issue in ISSUES.items() if issue in text)
        index = self._episode(token_ids, family)
        turn = token_ids.count(self.assistant) - 1
        script = self.scripts[family][index % len(self.scripts[family])]
        ids = self.tokenizer.encode(script[min(turn, len(script) - 1)], add_special_tokens=False)
        ids = ids + [self.tokenizer.eos_token_id]
        self.histories[tuple(token_ids + ids)] = index
        with torch.no_grad():
            logits = self.model(torch.tensor([token_ids + ids])).logits[0, len(token_ids) - 1:-1].float()
        logprobs = torch.log_softmax(logits / self.temperature, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        return Generation(ids, (logprobs + self.offset).tolist(), "stop")


@pytest.fixture
def scripted():
    def make(scripts, logprob_offset=0.0):
        return lambda model, seed: ScriptedEpisodes(model, build_tokenizer(), scripts, logprob_offset)

    return make


LOG3 = math.log(3.0)
STALL = ["<tool>test</tool>"]
"""An episode that runs the tests until it runs out of turns."""
