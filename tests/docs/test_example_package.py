"""The plugin-author guide's example packages as the guide says: a wheel with its entry point and recipe."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentrl-example-plugin"


def test_the_example_wheel_declares_its_agentrl_entry_point_and_ships_its_recipe(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(EXAMPLE)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("agentrl_example_plugin-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert entry_points.split() == ["[agentrl]", "arithmetic", "=", "agentrl_example_plugin.plugin"]
    assert "agentrl_example_plugin/arithmetic_median.toml" in names
