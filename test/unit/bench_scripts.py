"""The benchmark scripts of ``test/bench`` loaded as modules, for the unit tests of their
arithmetic (they are scripts, not a package: each is loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str, module_name: str | None = None) -> ModuleType:
    """``test/bench/<name>.py`` as the module ``module_name`` (``bench_<name>`` by default),
    registered in ``sys.modules`` so that its dataclasses and pickles find it."""
    module_name = module_name or f"bench_{name}"
    spec = importlib.util.spec_from_file_location(module_name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
