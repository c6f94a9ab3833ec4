"""Finding, or building once, the control-plane binaries.

Lookup order, as envtest's BinPathFinder: ``TEST_ASSET_<NAME>``, then ``$KUBEBUILDER_ASSETS``,
then our build cache (``$ENVTEST_ASSETS_DIR``, default
``~/.cache/trainer-py/k8s-assets/<versions key>``). Whatever is missing from all three is built
from Go modules by ``build_binaries.sh`` under a file lock, so concurrent test runs build once.
A build that fails raises :class:`AssetBuildError` naming the failing step: never a silent skip.

:func:`ensure_go_main` does the same for any Go main package at an exact module version (a
program to run beside the control plane, e.g. another implementation to compare against): it is
built once into ``<cache root>/go-mains/<module>@<version>/`` under the same kind of lock. A
``GoMain`` with ``test=True`` is a test package instead, compiled with ``go test -c`` into a test
binary in the same place (a module's own e2e suite, to run against a cluster later).
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from manager.envtest.errors import AssetBuildError

K8S_VERSION = os.environ.get("K8S_VERSION", "v1.36.3")
ETCD_VERSION = os.environ.get("ETCD_VERSION", "v3.6.16")
KWOK_VERSION = os.environ.get("KWOK_VERSION", "v0.7.0")
HELM_VERSION = os.environ.get("HELM_VERSION", "v3.22.0")

#: Which build piece produces which binary.
PIECES: dict[str, str] = {
    "etcd": "etcd",
    "kube-apiserver": "kube",
    "kube-controller-manager": "kube",
    "kube-scheduler": "kube",
    "kubectl": "kube",
    "kwok": "kwok",
    "helm": "helm",
    "kubelet": "node",
    "kube-proxy": "node",
}
#: Build order of the pieces.
_PIECE_ORDER = ["etcd", "kube", "node", "kwok", "helm"]


def _stamped_version(binary: str) -> str | None:
    """The pinned version a cached binary's ``<name>.version`` stamp must carry, if any.

    Tools that are not part of a control plane (``helm``) live in the same cache but are built
    only when asked for (``ensure(["helm"])``, never in PLAIN or FULL). Their version is not part
    of the cache key, so the build writes a ``<name>.version`` stamp beside the binary, and a
    cached binary counts only when its stamp matches the pinned version.
    """
    return {"helm": HELM_VERSION}.get(binary)


PLAIN = ("etcd", "kube-apiserver")
FULL = (*PLAIN, "kube-controller-manager", "kube-scheduler", "kwok")
NODE = ("kubelet", "kube-proxy")
"""What a real node adds (``Environment(real_node=True)``): built only when asked for."""

_BUILD_SCRIPT = Path(__file__).with_name("build_binaries.sh")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainer-py" / "k8s-assets"


def assets_dir() -> Path:
    """The build cache for the pinned versions (``ENVTEST_ASSETS_DIR`` overrides it)."""
    if override := os.environ.get("ENVTEST_ASSETS_DIR"):
        return Path(override)
    key = f"k8s-{K8S_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}_linux-amd64"
    return cache_root() / key


def _env_name(binary: str) -> str:
    return "TEST_ASSET_" + re.sub(r"[^A-Z0-9]+", "_", binary.upper())


def find(binary: str) -> Path | None:
    """Where an existing binary is, or None when it must be built."""
    if explicit := os.environ.get(_env_name(binary)):
        return Path(explicit)
    if kb := os.environ.get("KUBEBUILDER_ASSETS"):
        candidate = Path(kb) / binary
        if candidate.is_file():
            return candidate
    candidate = assets_dir() / binary
    if not candidate.is_file():
        return None
    if (pinned := _stamped_version(binary)) is not None:
        stamp = candidate.with_name(binary + ".version")
        if not stamp.is_file() or stamp.read_text().strip() != pinned:
            return None
    return candidate


@contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_build(
    command: list[str], *, env: dict[str, str], quiet: bool, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a build step; its output goes to stderr as it runs, or is kept for the error when quiet.

    A stderr without a file descriptor (pytest's capture, a notebook) gets the output line by line
    through a pipe instead of failing the build with ``UnsupportedOperation: fileno``."""
    if quiet:
        return subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    else:
        return subprocess.run(
            command, cwd=cwd, env=env, stdout=sys.stderr, stderr=subprocess.STDOUT, text=True, check=False
        )
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write(line)
    return subprocess.CompletedProcess(command, proc.returncode, "", None)


def build(
    pieces: Iterable[str],
    *,
    out: Path | None = None,
    quiet: bool = False,
    extra_env: dict[str, str] | None = None,
) -> float:
    """Build the named pieces (etcd, kube, node, kwok, helm) into the cache; returns the seconds it took."""
    if shutil.which("go") is None:
        raise AssetBuildError("go toolchain", "`go` is not on PATH; install Go or set KUBEBUILDER_ASSETS")
    out = out or assets_dir()
    env = {
        **os.environ,
        "HELM_VERSION": HELM_VERSION,
        "K8S_VERSION": K8S_VERSION,
        "ETCD_VERSION": ETCD_VERSION,
        "KWOK_VERSION": KWOK_VERSION,
        **(extra_env or {}),
    }
    started = time.monotonic()
    proc = _run_build(["bash", str(_BUILD_SCRIPT), str(out), *pieces], env=env, quiet=quiet)
    if proc.returncode != 0:
        output = proc.stdout or ""
        failed = re.findall(r"envtest build FAILED at step: (.*)", output)
        step = failed[-1] if failed else "build_binaries.sh"
        raise AssetBuildError(step, output[-4000:] if output else "see the output above")
    return time.monotonic() - started


def ensure(binaries: Iterable[str]) -> dict[str, Path]:
    """Paths of the wanted binaries, building what is missing (once, under a lock)."""
    wanted = list(binaries)
    unknown = [b for b in wanted if b not in PIECES]
    if unknown:
        raise ValueError(f"unknown control-plane binaries: {unknown}")
    if any(find(b) is None for b in wanted):
        with _build_lock(assets_dir()):
            missing = [b for b in wanted if find(b) is None]
            if missing:
                pieces = sorted({PIECES[b] for b in missing}, key=_PIECE_ORDER.index)
                build(pieces)
    paths: dict[str, Path] = {}
    for binary in wanted:
        path = find(binary)
        if path is None:
            raise AssetBuildError(PIECES[binary], f"{binary} is still missing after the build")
        paths[binary] = path
    return paths


@dataclass(frozen=True)
class GoMain:
    """A Go main package at an exact module version, built into one binary called ``name``.

    With ``test=True``, ``package`` is a package with tests, compiled by ``go test -c`` into a
    test binary called ``name`` (it runs the package's tests when executed).
    ``optimize=False`` compiles it without optimizations and inlining (``-N -l``), about a third
    less compile CPU: for programs only tests run, whose speed no benchmark figure depends on.
    """

    module: str
    version: str
    package: str
    name: str
    test: bool = False
    optimize: bool = True

    @property
    def key(self) -> str:
        return f"{self.module.replace('/', '_')}@{self.version}"


def go_mains_dir() -> Path:
    """Where built Go main packages are cached (``ENVTEST_GO_MAINS_DIR`` overrides it)."""
    if override := os.environ.get("ENVTEST_GO_MAINS_DIR"):
        return Path(override)
    return cache_root() / "go-mains"


def find_go_main(main: GoMain) -> Path | None:
    candidate = go_mains_dir() / main.key / main.name
    return candidate if candidate.is_file() else None


def ensure_go_main(main: GoMain, *, quiet: bool = False) -> tuple[Path, float]:
    """The path of the built binary and the seconds spent building it now (0 when cached)."""
    out = go_mains_dir() / main.key
    if (found := find_go_main(main)) is not None:
        return found, 0.0
    with _build_lock(out):
        if (found := find_go_main(main)) is not None:
            return found, 0.0
        seconds = build(
            ["gomain"],
            out=out,
            quiet=quiet,
            extra_env={
                "GOMAIN_MODULE": main.module,
                "GOMAIN_VERSION": main.version,
                "GOMAIN_PACKAGE": main.package,
                "GOMAIN_NAME": main.name,
                **({"GOMAIN_TEST": "1"} if main.test else {}),
                **({} if main.optimize else {"GOMAIN_OPTIMIZE": "0"}),
            },
        )
    found = find_go_main(main)
    if found is None:
        raise AssetBuildError(f"{main.module}@{main.version}", f"{main.name} is missing after the build")
    return found, seconds


def _source_digest(directory: Path) -> str:
    """A short digest of a Go module's own files (go.mod, go.sum, *.go): the cache key."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file() and (path.suffix == ".go" or path.name in ("go.mod", "go.sum")):
            digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def ensure_go_source(directory: Path, name: str, *, quiet: bool = False) -> tuple[Path, float]:
    """A Go main module kept in this repository (``directory`` holds its go.mod and main
    package), built once per content into ``<go-mains>/<name>@<digest>/<name>``, under a lock,
    with ``GOFLAGS=-mod=mod`` (dependencies from the module proxy). Returns the binary and the
    seconds spent building it now (0 when cached)."""
    if shutil.which("go") is None:
        raise AssetBuildError("go toolchain", "`go` is not on PATH")
    out = go_mains_dir() / f"{name}@{_source_digest(directory)}"
    binary = out / name
    if binary.is_file():
        return binary, 0.0
    with _build_lock(out):
        if binary.is_file():
            return binary, 0.0
        out.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "local"),
            "GOWORK": "off",
            "GOFLAGS": "-mod=mod -modcacherw",
            "CGO_ENABLED": "0",
        }
        started = time.monotonic()
        proc = _run_build(
            # -dwarf=false: the DWARF -w drops at link is not written at all (build_binaries.sh).
            [
                "go",
                "build",
                "-trimpath",
                "-gcflags",
                "all=-dwarf=false",
                "-ldflags",
                "-s -w",
                "-o",
                str(out / f"{name}.tmp"),
                ".",
            ],
            env=env,
            quiet=quiet,
            cwd=directory,
        )
        if proc.returncode != 0:
            raise AssetBuildError(f"go build {directory}", (proc.stdout or "see the output above")[-4000:])
        (out / f"{name}.tmp").rename(binary)
    return binary, time.monotonic() - started
