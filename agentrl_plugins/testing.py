"""Helpers for testing plugins: a byte-level chat tokenizer, scripted generation, a fresh environment, the
mapping contract every framework adapter keeps, and a Ray cluster of several nodes on one machine.

Like pytest's ``pytester``, these are part of the public API so that plugin
authors can test an environment or verifier the way the core tests its own,
and test their distribution as a user installs it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sysconfig
import venv
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, get_args

from agentrl_plugins.adapter import FrameworkAdapter, MappingStatus, decided_settings
from agentrl_plugins.recipe_schema import SECTIONS, Recipe
from agentrl_plugins.types import Generation, Sampling
from agentrl_plugins.user_config import same


class ByteChatTokenizer:
    """One token per byte plus role markers; the chat template closes every message with EOS."""

    pad_token_id, eos_token_id = 0, 1
    ROLES = {"system": 2, "user": 3, "assistant": 4, "tool": 5}
    OFFSET = 6

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.OFFSET + b for b in text.encode("utf-8")]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        data = bytes(i - self.OFFSET for i in ids if i >= self.OFFSET)
        return data.decode("utf-8", errors="replace")

    def apply_chat_template(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool = False,
                            tokenize: bool = True) -> list[int]:
        ids: list[int] = []
        for message in messages:
            ids += [self.ROLES[message["role"]]] + self.encode(message["content"]) + [self.eos_token_id]
        return ids + ([self.ROLES["assistant"]] if add_generation_prompt else [])


class ScriptedGenerate:
    """An async ``generate`` that replays texts in order, with a fixed log-prob per token.

    It records every prompt it was given, so tests can check what the sampler saw.
    """

    def __init__(self, texts: Sequence[str], tokenizer: Any, logprob: float = -0.5, eos: bool = True):
        self.texts, self.tokenizer, self.logprob, self.eos = list(texts), tokenizer, logprob, eos
        self.prompts: list[list[int]] = []
        self.outputs: list[list[int]] = []

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        self.prompts.append(list(token_ids))
        text = self.texts[len(self.outputs) % len(self.texts)]
        ids = self.tokenizer.encode(text) + ([self.tokenizer.eos_token_id] if self.eos else [])
        finish = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        self.outputs.append(ids)
        return Generation(ids, [self.logprob] * len(ids), finish)


def fresh_environment(root: Path, *projects: Path) -> Path:
    """A new virtual environment in ``root`` that sees this environment's packages, with ``projects``
    pip-installed into it (without dependencies); returns its Python. The installed plugins are visible
    there and not here, as on a user's machine."""
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    site_packages = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())
    (site_packages / "outer_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    if projects:
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        *map(str, projects)], check=True)
    return python


def recipe_keys() -> list[str]:
    """Every key of the recipe schema, ``section.key``."""
    return [f"{section}.{field.name}" for section, cls in SECTIONS.items() for field in dataclasses.fields(cls)]


def mapping_problems(adapter: FrameworkAdapter, recipe: Recipe) -> list[str]:
    """What breaks the mapping contract in ``adapter.describe(recipe)``; empty when it holds.

    The contract: exactly one row per recipe key, with the recipe's value and a known status, and no
    framework setting decided by two rows (:func:`~agentrl_plugins.adapter.decided_settings`).
    """
    rows = adapter.describe(recipe).mappings
    counts = Counter(row.key for row in rows)
    expected = recipe_keys()
    problems = [f"no row for {key}" for key in expected if key not in counts]
    problems += [f"{count} rows for {key}" for key, count in counts.items() if count > 1]
    problems += [f"a row for {key}, which is not a recipe key" for key in counts if key not in expected]
    for row in rows:
        section, _, name = row.key.partition(".")
        recipes = getattr(getattr(recipe, section), name) if row.key in expected else None
        if row.key in expected and not same(row.value, recipes):
            problems.append(f"{row.key}: the row says {row.value!r}, the recipe {recipes!r}")
        if row.status not in get_args(MappingStatus):
            problems.append(f"{row.key}: unknown status {row.status!r}")
    try:
        decided_settings(rows)
    except ValueError as error:
        problems.append(str(error))
    return problems


CLUSTER_NODE_MEMORY = 256 * 2**20
"""Object store bytes of each node of :func:`local_ray_cluster` (Ray's default would take 30% of memory each)."""


@contextmanager
def local_ray_cluster(nodes: int, gpus_per_node: int, cpus_per_node: int = 8) -> Iterator[str]:
    """A running Ray cluster of ``nodes`` nodes on this machine (one raylet each, as Ray's own
    ``ray.cluster_utils.Cluster`` tests multi-node code), each with ``gpus_per_node`` ``GPU`` slots (on a CPU, the
    slots verl's and OpenRLHF's CPU backends place their ranks by); yields its address for ``RAY_ADDRESS``. Its
    processes inherit this process's environment; the cluster stops on exit."""
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    try:
        for _ in range(nodes):
            cluster.add_node(num_cpus=cpus_per_node, num_gpus=gpus_per_node, object_store_memory=CLUSTER_NODE_MEMORY,
                             include_dashboard=False)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()
