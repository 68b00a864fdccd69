"""The docs generator (docs/gen/pages.py) as a module, and the tables the docs build wrote."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def load_docs_generator() -> ModuleType:
    """docs/gen/pages.py, which is a script beside the pages, not an installed module."""
    spec = importlib.util.spec_from_file_location("agentrl_docs_pages", DOCS / "gen" / "pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def pages() -> ModuleType:
    return load_docs_generator()


@pytest.fixture(scope="session")
def tables(pages) -> dict:
    """The framework mapping tables the docs build wrote (each in its framework's environment)."""
    return pages.load_tables()
