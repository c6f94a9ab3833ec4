"""Every ``# spec:`` marker of the test suite names a scenario of ``docs/behaviour``, and coverage holds.

The catalogues live in the repository (``docs/behaviour/{trainer,jobset,scheduling}.md``), so a marker
that names an id the catalogue lacks is a reference a clone cannot follow: this test fails on it.
"""

from __future__ import annotations

import pathlib
import textwrap

import pytest
import spec_coverage as sc

# Scenarios no test covers (none at present; list an id here, with the reason, if one is dropped).
UNCOVERED: dict[str, list[str]] = {"trainer": [], "jobset": [], "scheduling": []}
SIZES = {"trainer": 290, "jobset": 351, "scheduling": 77}


@pytest.mark.parametrize("area", sc.AREAS)
def test_every_marker_names_a_catalogue_scenario(area: str) -> None:
    cov = sc.coverage(area)
    bad = [f"{m.path.relative_to(sc.ROOT)}:{m.line}: {m.text}" for m in cov.unknown]
    assert bad == [], f"markers naming no scenario of docs/behaviour/{area}.md"


@pytest.mark.parametrize("area", sc.AREAS)
def test_coverage_is_unchanged(area: str) -> None:
    cov = sc.coverage(area)
    assert len(cov.scenarios) == SIZES[area]
    assert cov.missing == UNCOVERED[area]


def test_catalogue_ids_follow_the_document_structure() -> None:
    assert sc.catalogue("trainer")[:3] == ["A1", "A2", "A3"]
    assert "6.V.3" in sc.catalogue("jobset")
    assert sc.catalogue("scheduling")[-1] == "77"


def _docs(tmp_path: pathlib.Path, body: str) -> pathlib.Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "jobset.md").write_text(textwrap.dedent(body))
    return docs


def test_unknown_ids_ranges_and_lists_are_reported(tmp_path: pathlib.Path) -> None:
    docs = _docs(
        tmp_path,
        """\
        ## 6. Catalogue
        ### 6.A Group
        1. one.
        2. two.
        3. three.
        ## 7. After
        4. not a scenario.
        """,
    )
    tests = tmp_path / "tests"
    tests.mkdir()
    mark = "spec" + ":"  # spelt apart so this file carries no marker of its own
    (tests / "test_x.py").write_text(
        f"x = 1  # {mark} jobset 6.A.1-6.A.2\n"
        f"y = 2  # {mark} jobset 6.A.9 / {mark} jobset 6.A.3\n"
        f"z = 3  # {mark} jobset (nothing)\n"
    )
    cov = sc.coverage("jobset", docs, tests)
    assert cov.scenarios == ["6.A.1", "6.A.2", "6.A.3"]
    assert cov.referenced == {"6.A.1", "6.A.2", "6.A.3", "6.A.9"}
    assert [(m.line, m.ids) for m in cov.unknown] == [(2, ("6.A.9",)), (3, ())]
    assert cov.missing == []


def test_a_scenario_numbered_twice_is_an_error(tmp_path: pathlib.Path) -> None:
    docs = _docs(tmp_path, "## 6. C\n### 6.A G\n1. a.\n1. again.\n")
    with pytest.raises(ValueError, match=r"numbers these scenarios twice: 6\.A\.1"):
        sc.catalogue("jobset", docs)


def test_command_line_prints_the_figure_and_refuses_unknown_areas(capsys: pytest.CaptureFixture[str]) -> None:
    assert sc.main(["scheduling", "--list"]) == 0
    assert capsys.readouterr().out.strip() == "scheduling: 77/77 scenarios referenced by tests (100%)"
    with pytest.raises(SystemExit):
        sc.main(["nosuch"])
