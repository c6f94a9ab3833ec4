"""Why a conformance run stops is always printed: the failing scenario, its step and the error;
or, for a run stopped by SIGINT/SIGTERM, that it was interrupted, how far it got and where.

The real command (``python -m trainer conformance``) runs in a subprocess against two stand-in
API servers served by the test (``--kubeconfig-ours/--kubeconfig-theirs``, the mode for clusters
one runs oneself): a small in-memory Kubernetes API (discovery, create, list, delete of core
kinds). A failure is a real answer of that API (a 500 on one list), not a mocked function.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from local_http import serving

ROOT = Path(__file__).resolve().parents[3]
CORE_KINDS = {
    "namespaces": ("Namespace", False),
    "nodes": ("Node", False),
    "pods": ("Pod", True),
    "services": ("Service", True),
    "configmaps": ("ConfigMap", True),
    "secrets": ("Secret", True),
    "events": ("Event", True),
}


@dataclass
class StandIn:
    """An in-memory core/v1 API; ``fail_list`` maps a plural to the status its lists answer."""

    name: str
    objects: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    fail_list: dict[str, int] = field(default_factory=dict)
    deleted_namespaces: list[str] = field(default_factory=list)
    listed_namespaces: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1", self.discovery)
        app.router.add_get("/apis/{tail:.*}", self.not_served)
        app.router.add_get("/api/v1/{plural}", self.list_cluster)
        app.router.add_post("/api/v1/{plural}", self.create)
        app.router.add_delete("/api/v1/namespaces/{name}", self.delete_namespace)
        app.router.add_get("/api/v1/namespaces/{ns}/{plural}", self.list_namespaced)
        app.router.add_post("/api/v1/namespaces/{ns}/{plural}", self.create)
        return app

    async def discovery(self, _request: web.Request) -> web.Response:
        resources = [
            {"name": plural, "kind": kind, "namespaced": namespaced}
            for plural, (kind, namespaced) in CORE_KINDS.items()
        ]
        return web.json_response({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})

    async def not_served(self, _request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 404}, status=404)

    def _list(self, ns: str, plural: str) -> web.Response:
        if plural in self.fail_list:
            status = self.fail_list[plural]
            return web.json_response({"kind": "Status", "message": f"{self.name} is failing"}, status=status)
        return web.json_response({"kind": "List", "items": self.objects.get((ns, plural), [])})

    async def list_cluster(self, request: web.Request) -> web.Response:
        return self._list("", request.match_info["plural"])

    async def list_namespaced(self, request: web.Request) -> web.Response:
        self.listed_namespaces.append(request.match_info["ns"])
        return self._list(request.match_info["ns"], request.match_info["plural"])

    async def create(self, request: web.Request) -> web.Response:
        obj = await request.json()
        ns = request.match_info.get("ns", "")
        self.objects.setdefault((ns, request.match_info["plural"]), []).append(obj)
        return web.json_response(obj, status=201)

    async def delete_namespace(self, request: web.Request) -> web.Response:
        self.deleted_namespaces.append(request.match_info["name"])
        return web.json_response({"kind": "Status", "status": "Success"})


def kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def scenario(path: Path, *docs: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}


def step(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "conformance.trainer.kubeflow.org/v1alpha1", "kind": "Step", **fields}


@dataclass
class Run:
    proc: asyncio.subprocess.Process
    log: Path

    def output(self) -> str:
        return self.log.read_text()

    async def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.proc.returncode is None, f"exited before {text!r}:\n{self.output()}"
            assert time.monotonic() < deadline, f"no {text!r} after {timeout}s:\n{self.output()}"
            await asyncio.sleep(0.05)


@pytest.fixture
async def sides(tmp_path: Path) -> AsyncIterator[tuple[StandIn, StandIn, list[str]]]:
    ours, theirs = StandIn("ours"), StandIn("theirs")
    async with (
        serving(ours.app(), shutdown_timeout=0.1) as url_ours,
        serving(theirs.app(), shutdown_timeout=0.1) as url_theirs,
    ):
        args = [
            f"--kubeconfig-ours={kubeconfig(tmp_path / 'ours.yaml', url_ours)}",
            f"--kubeconfig-theirs={kubeconfig(tmp_path / 'theirs.yaml', url_theirs)}",
            "--quiet-seconds=0.5",
            "--pod-run-seconds=0",
        ]
        yield ours, theirs, args


async def conformance(tmp_path: Path, *args: str) -> Run:
    log = tmp_path / "conformance.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trainer",
            "conformance",
            *args,
            cwd=ROOT,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    return Run(proc, log)


async def test_a_failing_step_names_scenario_step_and_error(
    tmp_path: Path, sides: tuple[StandIn, StandIn, list[str]]
) -> None:
    _ours, theirs, args = sides
    first = scenario(tmp_path / "a-first.yaml", CONFIGMAP)
    failing = scenario(tmp_path / "b-failing.yaml", CONFIGMAP, step(settle=True))
    run = await conformance(tmp_path, *args, str(first), str(failing))
    await run.wait_for("[1/2] a-first.yaml done")
    theirs.fail_list["pods"] = 500  # theirs breaks after the first scenario
    code = await asyncio.wait_for(run.proc.wait(), 60)
    out = run.output()
    last = out.strip().splitlines()[-1]
    assert code == 2, out
    assert last.startswith("conformance: error after 1 scenarios, during b-failing/"), out
    assert "document 1: Step settle (theirs)" in last, out
    assert "KubeError: listing /api/v1/namespaces/" in last and "answered 500" in last, out
    assert "Traceback" not in out, out  # an expected kind of error: one line
    # what finished is still reported, and the failed scenario's namespace was removed
    assert "ok        a-first:" in out and "in 1 scenarios" in out, out
    assert any(ns.startswith("c-b-failing-") for ns in theirs.deleted_namespaces)


async def test_debug_adds_the_traceback_above_the_line(
    tmp_path: Path, sides: tuple[StandIn, StandIn, list[str]]
) -> None:
    ours, _theirs, args = sides
    ours.fail_list["nodes"] = 503
    run = await conformance(tmp_path, *args, "--debug", str(scenario(tmp_path / "x.yaml", CONFIGMAP)))
    code = await asyncio.wait_for(run.proc.wait(), 60)
    out = run.output()
    assert code == 2, out
    assert "Traceback (most recent call last)" in out, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("conformance: error after 0 scenarios, during x/list nodes (ours): KubeError:"), (
        out
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_an_interrupted_run_says_so_and_cleans_up(
    tmp_path: Path, sides: tuple[StandIn, StandIn, list[str]], sig: signal.Signals
) -> None:
    ours, theirs, args = sides
    first = scenario(tmp_path / "a-first.yaml", CONFIGMAP)
    slow = scenario(tmp_path / "b-slow.yaml", CONFIGMAP, step(settle=True, sleep=120))
    run = await conformance(tmp_path, *args, str(first), str(slow))
    await run.wait_for("[1/2] a-first.yaml done")
    # both sides are in the step once they list the scenario's namespace (its settle): the
    # ConfigMap, document 0, is created by then
    deadline = time.monotonic() + 30
    while not all(
        any(ns.startswith("c-b-slow-") for ns in side.listed_namespaces) for side in (ours, theirs)
    ):
        assert time.monotonic() < deadline, run.output()
        await asyncio.sleep(0.05)
    run.proc.send_signal(sig)
    code = await asyncio.wait_for(run.proc.wait(), 60)
    out = run.output()
    last = out.strip().splitlines()[-1]
    assert code == 128 + sig, out
    assert last.startswith(f"conformance: interrupted by {sig.name} after 1 scenarios, during b-slow/"), out
    assert (
        "document 1: Step settle+sleep (ours)" in last and "document 1: Step settle+sleep (theirs)" in last
    ), out
    assert "Traceback" not in out, out
    assert "ok        a-first:" in out, out  # the results so far
    for side in (ours, theirs):  # the interrupted scenario's namespace was removed on both
        assert any(ns.startswith("c-b-slow-") for ns in side.deleted_namespaces), side
