"""The Dockerfile, checked without a container runtime (test/e2e/deploy/test_image.py builds and
runs the image itself).

Its structure is read instruction by instruction: a build stage that makes the wheels once (the
dependencies' from pyproject.toml alone, then the project's offline from those), a runtime stage
that installs those wheels only, runs as a numeric non-root user and starts the console script
the Deployment and the chart name. Then the build stage's command is run for real on exactly the
files the build context (.dockerignore) sends: the wheel it makes must carry every module and
data file of the packages and the console script.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCRIPT = "trainer-controller-manager"


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Instructions with continuation lines joined; ARGs before the first FROM kept apart."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation line"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            words = rest.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(words[0], name))
        elif not stages:
            assert op == "ARG", f"{op} before the first FROM"
            key, _, value = rest.partition("=")
            args[key] = value
        else:
            stages[-1].instructions.append((op, rest))
    return args, stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    args, found = parse((ROOT / "Dockerfile").read_text())
    for stage in found:
        stage.base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), stage.base)
    return found


def test_two_stages_from_a_slim_python(stages: list[Stage]) -> None:
    assert [s.name for s in stages] == ["build", "runtime"]
    for stage in stages:
        image, _, tag = stage.base.partition(":")
        assert image == "python" and tag.endswith("-slim"), stage.base
        major, minor = (int(x) for x in tag.removesuffix("-slim").split(".")[:2])
        required = PYPROJECT["project"]["requires-python"].removeprefix(">=")
        assert (major, minor) >= tuple(int(x) for x in required.split(".")), "the image's Python is too old"


def test_the_base_image_is_a_build_argument_defaulting_to_upstreams() -> None:
    args, _ = parse((ROOT / "Dockerfile").read_text())
    assert args == {"PYTHON_IMAGE": "python:3.12-slim"}, "docker build without --build-arg: upstream's base"


def test_the_build_stage_makes_every_wheel_once(stages: list[Stage]) -> None:
    build = stages[0]
    runs = build.all("RUN")
    wheel = [r for r in runs if "pip wheel" in r]
    assert len(wheel) == 2, runs
    # First the dependencies (and the build backend), from pyproject.toml alone: their layer is
    # reused until it changes.
    dependencies, project = wheel
    first_copy = build.all("COPY")[0]
    assert first_copy.split() == ["pyproject.toml", "./"], "only pyproject.toml before the dependencies"
    for key in ("['project']['dependencies']", "['build-system']['requires']"):
        assert key in dependencies, f"the dependencies' wheels miss {key}"
    assert "-w /wheels" in dependencies
    # Then the project, offline: every dependency must be among those wheels.
    argv = shlex.split(project.split("&&")[0])
    assert argv[:2] == ["pip", "wheel"] and "." in argv and "--no-deps" not in argv, "dependencies resolved"
    assert "--no-index" in argv and "--find-links=/wheels" in argv
    assert argv[argv.index("-w") + 1] == "/wheels"
    copied = [a.split()[0] for a in build.all("COPY")] + [
        w for a in build.all("COPY") for w in a.split()[1:-1]
    ]
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repo"


def test_the_runtime_stage_installs_wheels_only_and_runs_as_non_root(stages: list[Stage]) -> None:
    runtime = stages[1]
    # Only the wheels' checksums are copied (they key the install layers, containers/buildah#6609).
    for copy in runtime.all("COPY"):
        words = copy.split()
        assert words[0] == "--from=build" and all(w.endswith(".sha256") for w in words[1:-1]), copy
    assert not runtime.all("ADD"), "no sources in the runtime image"
    installs = [r for r in runtime.all("RUN") if "pip install" in r]
    assert len(installs) == 2, "the dependencies, then the project"
    for install in installs:
        assert "--mount=type=bind,from=build,source=/wheels,target=/wheels" in install
        assert "--no-index" in install and "--find-links=/wheels" in install
    assert "-r /wheels/requirements.txt" in installs[0]
    assert "trainer-controller-manager" in installs[1] and "--no-deps" not in installs[1]
    # Each install follows the checksums of the wheels it installs.
    ops = [op for op, _ in runtime.instructions]
    for install in installs:
        index = next(i for i, (op, arg) in enumerate(runtime.instructions) if op == "RUN" and arg == install)
        assert ops[index - 1] == "COPY", "the install layer must follow the checksums it depends on"
    (user,) = runtime.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0, "runAsNonRoot needs a numeric, non-zero UID"
    assert not gid or gid.isdigit()
    env = " ".join(runtime.all("ENV"))
    assert "HOME=/tmp" in env and "TMPDIR=/tmp" in env, "nothing is written outside /tmp"
    assert "PYTHONDONTWRITEBYTECODE=1" in env


def test_the_entrypoint_is_the_console_script_the_deployments_run(stages: list[Stage]) -> None:
    (entrypoint,) = stages[1].all("ENTRYPOINT")
    assert yaml.safe_load(entrypoint) == [SCRIPT]
    assert SCRIPT in PYPROJECT["project"]["scripts"]
    deployment = yaml.safe_load((ROOT / "config" / "manager" / "deployment.yaml").read_text())
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"] == [SCRIPT]
    chart = (ROOT / "charts" / "kubeflow-trainer" / "templates" / "manager" / "deployment.yaml").read_text()
    assert f"command:\n        - {SCRIPT}\n" in chart


def _context_files() -> list[Path]:
    """The files `docker build .` sends, by .dockerignore (an allowlist: `*`, then `!path`)."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    sent: list[Path] = []
    for name in filter(None, tracked):
        included = True
        for pattern in patterns:
            negate = pattern.startswith("!")
            body = pattern.removeprefix("!").rstrip("/")
            hit = (
                fnmatch.fnmatch(name, body)
                or name.startswith(body + "/")
                or fnmatch.fnmatch(name, body + "/*")
            )
            if body.startswith("**/"):
                hit = fnmatch.fnmatch(name, body[3:]) or fnmatch.fnmatch(name, body)
            if hit:
                included = negate
        if included and (ROOT / name).is_file():
            sent.append(Path(name))
    return sent


def test_the_build_context_is_the_package_sources_only() -> None:
    sent = _context_files()
    tops = {p.parts[0] for p in sent}
    assert tops == {"pyproject.toml", "README.md", "manager", "trainer", "webhooks"}


def test_the_wheel_the_image_installs_carries_every_module_data_file_and_the_script(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for name in _context_files():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, context / name)
    wheels = tmp_path / "wheels"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", ".", "-w", str(wheels)],
        cwd=context,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = wheels.glob("trainer_controller_manager-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # Every file of the packages but the READMEs (docs) is installed.
    expected = {
        str(p)
        for p in _context_files()
        if p.parts[0] in {"manager", "trainer", "webhooks"} and p.name != "README.md"
    }
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks {missing} (pyproject.toml [tool.setuptools.package-data])"
    assert "trainer/api/openapi/k8s-v1.34.json" in names
    assert "manager/envtest/build_binaries.sh" in names
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert f"{SCRIPT} = trainer.cli:main" in entry_points  # signals deferred, then trainer.__main__
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()

    def name(requirement: str) -> str:
        return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower()

    requires = {
        name(line.split(":", 1)[1]) for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    }
    assert {name(r) for r in PYPROJECT["project"]["dependencies"]} <= requires
