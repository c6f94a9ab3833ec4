"""Helpers of the deployment e2e tests (a unique module name: ``conftest`` is ambiguous on
sys.path): the wheel the image would install, clusters of their own, the cached kubectl, the
three webhook configurations every deployment registers, the wait for a manager's /readyz and
the one for the API server to call those configurations.

The wheel is built from this checkout and installed with its dependencies into a clean
virtual environment outside the repository, as the Dockerfile does: a module or package file
missing from the wheel, or a missing console script, fails the tests that run from it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from manager.envtest import Environment, assets
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer.conformance.webhook_probes import wait_webhooks_effective

ROOT = Path(__file__).resolve().parents[3]
CONSOLE_SCRIPT = "trainer-controller-manager"
WEBHOOK_CONFIGURATIONS = (
    (
        GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
        "validator.trainer.kubeflow.org",
    ),
    (
        GroupVersionKind("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
        "jobset-mutating-webhook-configuration",
    ),
    (
        GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
        "jobset-validating-webhook-configuration",
    ),
)


def webhook_configurations(docs: Iterable[Mapping[str, Any]]) -> tuple[tuple[GroupVersionKind, str], ...]:
    """The webhook configurations among rendered manifests (level v2.3 adds the TrainJob
    defaulter's to ``WEBHOOK_CONFIGURATIONS``)."""
    return tuple(
        (GroupVersionKind("admissionregistration.k8s.io", "v1", d["kind"]), d["metadata"]["name"])
        for d in docs
        if d["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    )


def _read(path: Path) -> str:
    return path.read_text()


async def wait_until_ready(
    http: aiohttp.ClientSession,
    probe: str,
    log_path: Path,
    *,
    proc: asyncio.subprocess.Process | None = None,
    traceback_free: bool = False,
    message: str = "the manager never became ready",
) -> None:
    """Until ``{probe}/readyz`` answers 200; fails early if ``proc`` exited or (``traceback_free``)
    the log shows a Python traceback."""

    async def ready() -> None:
        log = _read(log_path)
        if proc is not None:
            assert proc.returncode is None, log[-3000:]
        if traceback_free:
            assert "Traceback" not in log, log[-3000:]
        try:
            async with http.get(f"{probe}/readyz") as r:
                assert r.status == 200, await r.text()
        except aiohttp.ClientConnectionError as err:
            raise AssertionError(f"probe not answering: {err}") from err

    await eventually(ready, timeout=120, message=message)


async def wait_webhooks_answer(
    env: Environment,
    namespace: str,
    configurations: tuple[tuple[GroupVersionKind, str], ...] = WEBHOOK_CONFIGURATIONS,
) -> None:
    """Until the API server calls the configurations as they are stored now (the CA the
    rotator injected, the URL ``make run`` registered) and the manager answers. The API server's
    webhook informer has a configuration a moment after it is written: until then a call fails
    (TLS verification without the CA: failurePolicy Fail refuses the write) or is not made."""
    docs = []
    for gvk, name in configurations:
        path = f"/apis/{gvk.group}/{gvk.version}/{gvk.kind.lower()}s/{name}"
        status, doc = await env.request("GET", path)
        assert status == 200, (path, status, doc)
        docs.append(doc)
    await wait_webhooks_effective(env, docs, namespace, timeout=120)


@dataclass(frozen=True)
class Installed:
    """A virtual environment with only the wheel (and its dependencies) installed."""

    venv: Path
    wheel: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def clean_env(self, **extra: str) -> dict[str, str]:
        """An environment with nothing of the repository or of the test's own venv in it."""
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.venv.parent), "LANG": "C.UTF-8"}
        return {**env, **extra}


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def install_wheel(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel-install")
    assert ROOT not in base.parents, "the install must live outside the repository"
    # Built from a copy of the checkout's files (tracked and new, not ignored): a stale build/
    # directory in the repository could otherwise put deleted modules into the wheel.
    source = base / "source"
    files = _run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)])
    (wheel,) = dist.glob("trainer_controller_manager-*.whl")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=base)
    installed = Installed(venv, wheel)
    # The entry point the Deployment names exists, and imports resolve into the venv, not the repo.
    assert (installed.bin / CONSOLE_SCRIPT).is_file(), "the wheel installs no console script"
    where = _run(
        [str(venv / "bin" / "python"), "-c", "import trainer, webhooks, manager; print(trainer.__file__)"],
        cwd=base,
        env=installed.clean_env(),
    ).stdout.strip()
    assert Path(where).is_relative_to(venv), where
    _run([str(installed.bin / CONSOLE_SCRIPT), "--help"], cwd=base, env=installed.clean_env())
    return installed


def kubectl() -> Path:
    """The kubectl of the control-plane asset cache (with kustomize built in)."""
    return assets.ensure(["kubectl"])["kubectl"]


def own_cluster(directory: Path) -> Iterator[Environment]:
    """A full local cluster for one module: these tests install cluster-wide objects (CRDs,
    webhook configurations with the shipped names) that the shared cluster's tests also use."""
    env = Environment(directory, full=True, nodes=2)
    asyncio.run(env.start())
    try:
        yield env
    finally:
        if not os.environ.get("KEEP_CONTROL_PLANE"):
            asyncio.run(env.stop())


async def write_service_account_volume(
    env: Environment, client: Any, pod: dict[str, Any], namespace: str, sa_dir: Path
) -> None:
    """What the kubelet's projected ServiceAccount volume holds, written into ``sa_dir``: a
    TokenRequest token of the pod's ServiceAccount, the cluster CA and the namespace."""
    token = await client.transport.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{pod['serviceAccountName']}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    (sa_dir / "token").write_text(token["status"]["token"])
    (sa_dir / "ca.crt").write_bytes((env.dir / "serving-ca.crt").read_bytes())
    (sa_dir / "namespace").write_text(namespace)
