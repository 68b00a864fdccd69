"""Fixtures for core tests: fake installed distributions with ``agentrl`` entry points."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def fake_distribution(tmp_path, monkeypatch):
    """Make ``make(dist_name, {ep_name: module_source})`` an installed distribution on ``sys.path``."""

    def make(dist_name: str, modules: dict[str, str]) -> Path:
        root = tmp_path / dist_name
        info = root / f"{dist_name.replace('-', '_')}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
        lines = ["[agentrl]"]
        for entry_name, source in modules.items():
            module = f"{dist_name.replace('-', '_')}_{entry_name}"
            (root / f"{module}.py").write_text(textwrap.dedent(source))
            lines.append(f"{entry_name} = {module}")
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        return root

    yield make
    for name in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[name]
