"""The layout documents name the tree as it is: a module added, moved or deleted without its line
in the README's Architecture section or a package's module table fails here, as does a link or a
path that no longer resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_NOT_MODULES = {"__init__.py", "__main__.py", "py.typed", "README.md", "__pycache__"}


def _modules(package: Path) -> set[str]:
    """``x.py`` and ``x/`` for every module and subpackage of ``package``."""
    names = set()
    for child in package.iterdir():
        if child.name in _NOT_MODULES or child.name.endswith(".egg-info"):
            continue
        if child.is_dir() and (child / "__init__.py").exists():
            names.add(child.name + "/")
        elif child.suffix == ".py":
            names.add(child.name)
    return names


def _table_names(readme: Path) -> set[str]:
    """Every backticked name in the first column of the README's tables (``a.py``, ``b/``; a
    cell may name several, and ``*_constants.py`` stands for every match)."""
    names: set[str] = set()
    for line in readme.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        names.update(re.findall(r"`([^`]+)`", first_cell))
    return names


def _expand(names: set[str], package: Path) -> set[str]:
    out = set()
    for name in names:
        if "/" in name:
            out.add(name.split("/")[0] + "/")  # ``plugins/base.py`` is a line about ``plugins/``
        elif "*" in name:
            out.update(p.name for p in package.glob(name))
        else:
            out.add(name)
    return out


@pytest.mark.parametrize("package", ["manager", "trainer/api", "trainer/runtime"])
def test_a_package_module_table_names_every_module_and_only_those(package: str) -> None:
    directory = ROOT / package
    listed = _expand(_table_names(directory / "README.md"), directory)
    present = _modules(directory)
    assert present - listed == set(), f"{package}/README.md does not list these modules"
    assert listed - present == set(), f"{package}/README.md lists modules that do not exist"


def _architecture_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Architecture")
    end = text.index("\n## ", start + 1)
    return text[start:end]


@pytest.mark.parametrize("package", ["trainer", "trainer/controllers", "trainer/runtime", "webhooks"])
def test_the_architecture_section_names_every_module(package: str) -> None:
    words = set(re.findall(r"[\w.]+", _architecture_section()))
    missing = {
        name
        for name in _modules(ROOT / package)
        if name.removesuffix(".py").removesuffix("/") not in words and name not in words
    }
    assert missing == set(), f"README's Architecture section names none of {package}'s {sorted(missing)}"


def test_every_path_the_architecture_section_names_exists() -> None:
    paths = re.findall(
        r"(?<![\w/.])((?:manager|trainer|webhooks|config|charts|docs)/[\w./-]*)", _architecture_section()
    )
    assert paths, "the Architecture section names no path"
    absent = [p for p in paths if not any((ROOT / (p.rstrip(".") + end)).exists() for end in ("", ".py"))]
    assert absent == []


@pytest.mark.parametrize(
    "readme", ["README.md", "manager/README.md", "trainer/api/README.md", "trainer/runtime/README.md"]
)
def test_relative_links_resolve(readme: str) -> None:
    path = ROOT / readme
    broken = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        if not (path.parent / target).exists():
            broken.append(target)
    assert broken == []
