"""The import-layer contract: the core imports no environment, model or adapter; nothing points back up.

Every import statement of every module in each distribution's package is read from the source
(imports inside functions included, since a lazy import is still a dependency), and each import of
another first-party package must be one its layer allows. A second test adds a back-up import to a
copy of the tree and shows the check fails on it.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGES = {
    "agentrl_plugins": ROOT / "agentrl_plugins",
    "bugfix_gym": ROOT / "envs" / "bugfix_gym" / "bugfix_gym",
    "agentrl_tinyagent": ROOT / "models" / "tinyagent" / "agentrl_tinyagent",
    "agentrl_trl": ROOT / "adapters" / "trl" / "agentrl_trl",
    "agentrl_verl": ROOT / "adapters" / "verl" / "agentrl_verl",
    "agentrl_openrlhf": ROOT / "adapters" / "openrlhf" / "agentrl_openrlhf",
    "agentrl_example_plugin": ROOT / "docs" / "examples" / "agentrl-example-plugin" / "agentrl_example_plugin",
}
"""Each first-party import package and its source folder."""
MAY_IMPORT = {
    "agentrl_plugins": set(),
    "bugfix_gym": {"agentrl_plugins"},
    "agentrl_tinyagent": {"agentrl_plugins", "bugfix_gym"},
    "agentrl_trl": {"agentrl_plugins"},
    "agentrl_verl": {"agentrl_plugins"},
    "agentrl_openrlhf": {"agentrl_plugins"},
    "agentrl_example_plugin": {"agentrl_plugins"},
}
"""The layers: the core below; environments, models, adapters and plugins above it; a model may build on the
environment it is trained for. Adapters import no other adapter, environment or model."""


@dataclass(frozen=True)
class Violation:
    module: Path
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.imported}"


def imported_packages(source: str) -> list[tuple[int, str]]:
    """``(line, top-level package)`` of every absolute import in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def violations(packages: dict[str, Path], allowed: dict[str, set[str]]) -> list[Violation]:
    """Every import of a first-party package that its importer's layer does not allow."""
    broken = []
    for package, folder in packages.items():
        for module in sorted(folder.rglob("*.py")):
            for line, imported in imported_packages(module.read_text()):
                if imported in packages and imported != package and imported not in allowed[package]:
                    broken.append(Violation(module.relative_to(folder.parent), line, imported))
    return broken


TEST_KIT = "agentrl_plugins.testing"
"""The test kit plugin authors' tests import; no package's own code does."""


def imported_modules(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``source``, ``from A import B`` giving ``A.B`` as well."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def kit_importers(packages: dict[str, Path]) -> list[str]:
    """``module:line`` of every import of :data:`TEST_KIT` in the packages' code (the kit itself aside)."""
    return [f"{module.relative_to(folder.parent)}:{line}" for folder in packages.values()
            for module in sorted(folder.rglob("*.py")) if module != PACKAGES["agentrl_plugins"] / "testing.py"
            for line, name in imported_modules(module.read_text()) if name == TEST_KIT]


def test_no_package_imports_the_test_kit(tmp_path):
    assert kit_importers(PACKAGES) == []
    planted = tmp_path / "agentrl_trl"
    shutil.copytree(PACKAGES["agentrl_trl"], planted, ignore=shutil.ignore_patterns("__pycache__"))
    (planted / "runner.py").write_text("from agentrl_plugins import testing\n" + (planted / "runner.py").read_text())
    assert kit_importers({"agentrl_trl": planted}) == ["agentrl_trl/runner.py:1"]


def test_every_first_party_package_is_in_the_contract():
    assert set(PACKAGES) == set(MAY_IMPORT)
    assert all((folder / "__init__.py").is_file() for folder in PACKAGES.values())


def test_the_layers_hold():
    assert [str(v) for v in violations(PACKAGES, MAY_IMPORT)] == []


def test_a_back_up_import_breaks_the_contract(tmp_path):
    copies = {name: tmp_path / name for name in PACKAGES}
    for name, folder in PACKAGES.items():
        shutil.copytree(folder, copies[name], ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(copies, MAY_IMPORT) == []
    record = copies["agentrl_plugins"] / "compare" / "record.py"
    record.write_text(record.read_text() + "\n\ndef _policies():\n    from bugfix_gym import policies\n")
    trainer = copies["agentrl_verl"] / "launch.py"
    trainer.write_text("import agentrl_trl.runner\n" + trainer.read_text())
    found = [(str(v.module), v.imported) for v in violations(copies, MAY_IMPORT)]
    assert found == [("agentrl_plugins/compare/record.py", "bugfix_gym"), ("agentrl_verl/launch.py", "agentrl_trl")]
