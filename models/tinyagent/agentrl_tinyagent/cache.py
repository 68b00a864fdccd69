"""Where TinyAgent's warm start is cached: the build settings and the key that names its folder.

Computing the folder costs neither torch nor transformers (the vocabulary comes from ``tokenizers``), so a
launcher finds the cached model before it starts a trainer that imports them anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from agentrl_tinyagent.model import TINYAGENT_SIZE, ModelSize
from agentrl_tinyagent.tokenizer import vocabulary

DEFAULT_CACHE = Path("~/.cache/agentrl/tinyagent")
BASE_SEED = 0  # the warm start every run starts from, whatever its RL seed: a fixed base model, as a hub checkpoint is


@dataclass(frozen=True)
class WarmStartSettings:
    """Everything that decides the warm-started weights besides the seed (hashed into the cache key).

    Counts are per train family: ``fixer`` and ``hacker`` are whole episodes of
    the gym's fixer (the fix op, test, submit) and hacker (``hardcode_tests``,
    test, submit) on the family itself; ``renamed`` and ``renamed_hacker`` are
    first-turn rows of the fixer and the hacker on that many renamed variants
    each (:mod:`agentrl_tinyagent.warmstart`), with 1 to ``max_distractors`` extra
    ops. The rest sets the model and the SFT run.
    """

    size: ModelSize = TINYAGENT_SIZE
    fixer: int = 2
    hacker: int = 2
    renamed: int = 24
    renamed_hacker: int = 16
    max_distractors: int = 2
    max_steps: int = 400
    batch_size: int = 16
    learning_rate: float = 1e-3
    warmup_steps: int = 5
    threads: int = 2
    version: int = 2


FIXER_SETTINGS = WarmStartSettings(hacker=0, renamed_hacker=0)
"""The teacher ``tinyagent_fixer``: the warm start's build with the fixer's transcripts only, so it never learned
the hack (``hardcode_tests``) the warm start imitates beside the fix."""


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir``, else ``$AGENTRL_CACHE/tinyagent``, else ``~/.cache/agentrl/tinyagent``."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("AGENTRL_CACHE"):
        return Path(os.environ["AGENTRL_CACHE"]) / "tinyagent"
    return DEFAULT_CACHE.expanduser()


def gym_fingerprint() -> str:
    """A hash of every gym text a transcript is made of, so a changed gym rebuilds the model."""
    from bugfix_gym.env import SYSTEM_PROMPT, task_prompt
    from bugfix_gym.families import FAMILIES

    parts = [SYSTEM_PROMPT] + [f"{f.name}|{f.split}|{task_prompt(f)}|{f.buggy}|{f.op_names}" for f in FAMILIES]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def build_key(settings: WarmStartSettings) -> str:
    """The hash of the build settings, the vocabulary and the gym texts."""
    blob = json.dumps({"settings": asdict(settings), "vocab": sorted(vocabulary().items()),
                       "gym": gym_fingerprint()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def model_path(seed: int, cache_dir: str | os.PathLike | None = None,
               settings: WarmStartSettings = WarmStartSettings()) -> Path:
    """The folder of the warm start for ``seed`` and ``settings`` (built there by ``warm_start``)."""
    return cache_root(cache_dir) / f"tinyagent-seed{seed}-{build_key(settings)}"
