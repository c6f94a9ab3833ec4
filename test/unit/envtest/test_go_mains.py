"""Building and caching a Go main package at module@version (the Go originals)."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.envtest import assets
from manager.envtest.errors import AssetBuildError

MAIN = assets.GoMain("example.com/mod", "v1.2.3", "example.com/mod/cmd/tool", "tool")


def test_a_cached_binary_is_used_without_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVTEST_GO_MAINS_DIR", str(tmp_path))
    binary = tmp_path / "example.com_mod@v1.2.3" / "tool"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")

    def no_build(*_args: object, **_kwargs: object) -> float:
        raise AssertionError("a cached binary must not be rebuilt")

    monkeypatch.setattr(assets, "build", no_build)
    assert assets.ensure_go_main(MAIN) == (binary, 0.0)


def test_a_missing_binary_is_built_once_with_the_module_coordinates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVTEST_GO_MAINS_DIR", str(tmp_path))
    calls: list[tuple[list[str], Path, dict[str, str]]] = []

    def fake_build(pieces: list[str], *, out: Path, quiet: bool, extra_env: dict[str, str]) -> float:
        calls.append((pieces, out, extra_env))
        out.mkdir(parents=True, exist_ok=True)  # as build_binaries.sh does
        (out / extra_env["GOMAIN_NAME"]).write_text("bin")
        return 42.0

    monkeypatch.setattr(assets, "build", fake_build)
    path, seconds = assets.ensure_go_main(MAIN)
    assert (path, seconds) == (tmp_path / "example.com_mod@v1.2.3" / "tool", 42.0)
    assert calls == [
        (
            ["gomain"],
            tmp_path / "example.com_mod@v1.2.3",
            {
                "GOMAIN_MODULE": "example.com/mod",
                "GOMAIN_VERSION": "v1.2.3",
                "GOMAIN_PACKAGE": "example.com/mod/cmd/tool",
                "GOMAIN_NAME": "tool",
            },
        )
    ]
    assert assets.ensure_go_main(MAIN) == (path, 0.0)


def test_a_build_that_produces_nothing_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVTEST_GO_MAINS_DIR", str(tmp_path))
    monkeypatch.setattr(assets, "build", lambda *a, **k: 1.0)
    with pytest.raises(AssetBuildError, match="tool is missing after the build"):
        assets.ensure_go_main(MAIN)


def test_a_test_package_is_built_with_go_test_c_into_the_same_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVTEST_GO_MAINS_DIR", str(tmp_path))
    suite = assets.GoMain("example.com/mod", "v1.2.3", "example.com/mod/test/e2e", "e2e.test", test=True)
    seen: list[dict[str, str]] = []

    def fake_build(pieces: list[str], *, out: Path, quiet: bool, extra_env: dict[str, str]) -> float:
        seen.append(extra_env)
        out.mkdir(parents=True, exist_ok=True)
        (out / extra_env["GOMAIN_NAME"]).write_text("bin")
        return 7.0

    monkeypatch.setattr(assets, "build", fake_build)
    assert assets.ensure_go_main(suite) == (tmp_path / "example.com_mod@v1.2.3" / "e2e.test", 7.0)
    assert seen[0]["GOMAIN_TEST"] == "1" and seen[0]["GOMAIN_PACKAGE"] == "example.com/mod/test/e2e"
    # the build script compiles it with `go test -c`
    script = Path(assets.__file__).with_name("build_binaries.sh").read_text()
    assert 'GOMAIN_TEST:-0}" = 1' in script and "go test -c" in script


def test_an_unoptimized_main_asks_the_build_for_no_optimizations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test-only program (Kueue, an upstream e2e suite) is compiled with -N -l; the Go originals
    the benchmarks measure are not."""
    monkeypatch.setenv("ENVTEST_GO_MAINS_DIR", str(tmp_path))
    seen: list[dict[str, str]] = []

    def fake_build(pieces: list[str], *, out: Path, quiet: bool, extra_env: dict[str, str]) -> float:
        seen.append(extra_env)
        out.mkdir(parents=True, exist_ok=True)
        (out / extra_env["GOMAIN_NAME"]).write_text("bin")
        return 1.0

    monkeypatch.setattr(assets, "build", fake_build)
    plain = assets.GoMain("example.com/mod", "v1.2.3", "example.com/mod/cmd/a", "a", optimize=False)
    assets.ensure_go_main(plain)
    assets.ensure_go_main(MAIN)
    assert seen[0]["GOMAIN_OPTIMIZE"] == "0"
    assert "GOMAIN_OPTIMIZE" not in seen[1]
