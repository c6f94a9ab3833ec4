"""The chaos suite's own tools (test/chaos): the fault proxy injects what it says, and the
end-state check catches a lost TrainJob, a duplicate JobSet and an orphan Job."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))

from faultproxy import FaultPlan, FaultProxy
from local_http import initial_events, serving
from workload import Snapshot, build, problems
from workload_v2_1 import V2_1

from manager.cache.backoff import ReflectorBackoff
from manager.cache.reflector import ListWatchOptions, Reflector
from manager.client import Client, RestTransport
from manager.client.restmapper import RESTMapper, RESTMapping
from manager.config import RestConfig
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

Json = dict[str, Any]


@pytest.fixture
async def upstream() -> Any:
    """A plain-HTTP stand-in for the API server: a GET answers, a watch streams one event."""

    async def get(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            resp = web.StreamResponse()
            await resp.prepare(request)
            await resp.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')
            await asyncio.sleep(3)
            return resp
        return web.json_response({"kind": "ConfigMapList", "items": []})

    app = web.Application()
    app.router.add_get("/{tail:.*}", get)
    async with serving(app) as url:
        yield url


async def test_proxy_forwards_then_injects_429_with_retry_after_and_500(upstream: str) -> None:
    async with FaultProxy(upstream, None, seed=1) as proxy, aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/api/v1/configmaps") as r:
            assert (r.status, (await r.json())["kind"]) == (200, "ConfigMapList")
        proxy.faults_on(FaultPlan(p_429=1.0, p_500=0, p_drop=0, p_slow=0, retry_after_seconds=3))
        async with http.get(proxy.url + "/api/v1/configmaps") as r:
            body = await r.json()
            assert (r.status, r.headers["Retry-After"], body["reason"]) == (429, "3", "TooManyRequests")
        proxy.faults_on(FaultPlan(p_429=0, p_500=1.0, p_drop=0, p_slow=0))
        async with http.get(proxy.url + "/api/v1/configmaps") as r:
            assert (r.status, (await r.json())["code"]) == (500, 500)
        proxy.faults_on(FaultPlan(p_429=0, p_500=0, p_drop=1.0, p_slow=0))
        with pytest.raises(aiohttp.ClientError):
            async with http.get(proxy.url + "/api/v1/configmaps") as r:
                await r.read()
        proxy.faults_off()
        assert proxy.injected["429"] == proxy.injected["500"] == 1
        assert proxy.injected["drop"] >= 1  # aiohttp retries a GET once on a dropped keep-alive connection


async def test_a_fault_window_injects_every_kind_even_when_few_requests_pass(upstream: str) -> None:
    # A short window on a quiet cluster sees few requests; the checks count each kind, so the
    # first requests take every kind once whatever the probabilities.
    rare = FaultPlan(p_429=1e-9, p_500=1e-9, p_drop=1e-9, p_slow=1e-9, slow_seconds=(0.01, 0.02))
    async with FaultProxy(upstream, None, seed=7) as proxy, aiohttp.ClientSession() as http:
        proxy.faults_on(rare)
        statuses = []
        for _ in range(4):
            try:
                async with http.get(proxy.url + "/api/v1/configmaps") as r:
                    statuses.append(r.status)
            except aiohttp.ClientError:
                statuses.append("dropped")
        assert sorted(map(str, statuses)) == ["200", "429", "500", "dropped"] or sorted(
            map(str, statuses)
        ) == ["200", "200", "429", "500"]  # a drop after forwarding is retried by aiohttp's GET
        assert dict(proxy.injected) == {"429": 1, "500": 1, "drop": 1, "slow": 1}
        proxy.faults_off()


async def test_expired_watch_ends_with_an_error_410_event(upstream: str) -> None:
    async with FaultProxy(upstream, None) as proxy, aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/api/v1/configmaps?watch=true") as r:
            first = json.loads(await r.content.readline())
            assert first["type"] == "ADDED"
            assert proxy.expire_watches() == 1
            last = json.loads(await r.content.readline())
        assert (last["type"], last["object"]["code"], last["object"]["reason"]) == ("ERROR", 410, "Expired")


async def test_an_expired_watch_reaches_a_busy_client_as_a_complete_response(upstream: str) -> None:
    # The API server ends the response after its ERROR event. A proxy that drops the connection
    # instead loses the event for a client still busy with earlier ones: aiohttp then raises the
    # dropped connection before the bytes it holds, and the watch looks like a normal end.
    async with FaultProxy(upstream, None) as proxy, aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/api/v1/configmaps?watch=true") as r:
            assert json.loads(await r.content.readline())["type"] == "ADDED"
            assert proxy.expire_watches() == 1
            await asyncio.sleep(0.3)  # busy: the event and the end both arrive before the next read
            rest = await r.content.read()
        last = json.loads(rest)
        assert (last["type"], last["object"]["code"]) == ("ERROR", 410)


async def test_an_expiry_between_the_reads_of_one_event_still_ends_the_watch_in_a_410_relist(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The API server writes each watch event whole and ends a watcher only between events. An
    # event bigger than one read reaches the proxy in parts; an expiry that cancelled the pump
    # between them used to append the ERROR event to the half already forwarded. The client
    # then read one undecodable line, backed off and relisted *without* the "expired at rv"
    # line the chaos harness counts: "28 watches expired but only 27 relists logged".
    modified = orjson.dumps({"type": "MODIFIED", "object": _widget("3", "x" * 4096)}) + b"\n"
    half_sent = asyncio.Event()
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response(
                {"kind": "WidgetList", "metadata": {"resourceVersion": "1"}, "items": []}
            )
        resp = web.StreamResponse()
        await resp.prepare(request)
        if request.query.get("sendInitialEvents") == "true":  # the state, read as a watch-list
            await resp.write(initial_events([], "1"))
        await resp.write(orjson.dumps({"type": "ADDED", "object": _widget("2", "")}) + b"\n")
        await resp.write(modified[: len(modified) // 2])  # the rest is never sent
        half_sent.set()
        await release.wait()
        return resp

    sink = _Sink()
    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    async with serving(app, shutdown_timeout=0.1) as upstream, FaultProxy(upstream, None) as proxy:
        transport = RestTransport(RestConfig(host=proxy.url))
        mapper = RESTMapper(transport)
        mapper.add(WIDGETS)
        reflector = Reflector(
            Client(transport, mapper),
            WIDGETS,
            sink,
            ListWatchOptions(min_watch_timeout=60),
            backoff=ReflectorBackoff(initial=0.05, jitter=0),
        )
        task = asyncio.create_task(reflector.run())
        try:
            await half_sent.wait()
            await eventually(lambda: sink.rvs == ["2"], timeout=5)
            await asyncio.sleep(0.3)  # the proxy has read the half; the rest never comes
            with caplog.at_level(logging.INFO, logger="manager.cache.reflector"):
                assert proxy.expire_watches() == 1
                await eventually(lambda: reflector.syncs == 2, timeout=5)
            assert reflector.expired == 1
            assert [r.getMessage() for r in caplog.records if "expired at rv" in r.getMessage()] == [
                f"watch of {WIDGETS.gvk} expired at rv 2: relisting"
            ]
        finally:
            task.cancel()
            release.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await transport.aclose()


WIDGETS = RESTMapping(GroupVersionKind("example.com", "v1", "Widget"), "widgets", True)


def _widget(rv: str, payload: str) -> Json:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": rv},
        "data": payload,
    }


class _Sink:
    """The reflector's sink: which resourceVersions the watch delivered."""

    def __init__(self) -> None:
        self.rvs: list[str] = []

    def replace(self, items: Any, namespace: str | None, initial: bool, *, prepared: bool = False) -> None:
        pass

    def upsert(self, obj: Json) -> None:
        self.rvs.append(obj["metadata"]["resourceVersion"])

    def remove(self, obj: Json) -> None:
        pass


def _converged(items: list[Any]) -> Snapshot:
    """The end state the workload must reach, built by hand for the TrainJobs of ``items``."""
    tjs: dict[str, Json] = {}
    jobsets: dict[str, Json] = {}
    jobs: dict[str, Json] = {}
    for i, item in enumerate(items):
        uid = f"uid-{i}"
        cond = {"Complete": "Complete", "Failed": "Failed", "Suspended": "Suspended"}[item.expected]
        tjs[item.name] = {
            "metadata": {"name": item.name, "uid": uid},
            "status": {"conditions": [{"type": cond, "status": "True"}]},
        }
        rjs = [{"name": "node", "replicas": 1}]
        jobsets[item.name] = {
            "metadata": {
                "name": item.name,
                "uid": f"js-{uid}",
                "ownerReferences": [{"kind": "TrainJob", "uid": uid, "controller": True}],
            },
            "spec": {"replicatedJobs": rjs, "suspend": item.flavour == "suspended"},
        }
        jobs[f"{item.name}-node-0"] = {
            "metadata": {
                "name": f"{item.name}-node-0",
                "uid": f"job-{uid}",
                "ownerReferences": [{"kind": "JobSet", "uid": f"js-{uid}", "controller": True}],
            }
        }
    return Snapshot(tjs, jobsets, jobs, {}, [], [], [], [])


def test_end_state_check_catches_lost_duplicate_and_orphan() -> None:
    items = [i for i in build("ns", 20, 0, 0, V2_1) if i.flavour in ("torch", "suspended", "deadline")]
    snap = _converged(items)
    assert problems(items, snap) == []

    lost = copy.deepcopy(snap)
    del lost.trainjobs[items[0].name]
    assert f"TrainJob {items[0].name} lost" in problems(items, lost)

    dup = copy.deepcopy(snap)
    extra = copy.deepcopy(dup.jobsets[items[1].name])
    extra["metadata"] |= {"name": "dup", "uid": "js-dup"}
    dup.jobsets["dup"] = extra
    assert any("must have exactly" in p for p in problems(items, dup))

    orphan = copy.deepcopy(snap)
    orphan.jobs["stray-node-0"] = {
        "metadata": {
            "name": "stray-node-0",
            "uid": "x",
            "ownerReferences": [{"kind": "JobSet", "uid": "gone", "controller": True}],
        }
    }
    assert "orphan Job stray-node-0" in problems(items, orphan)

    wrong = copy.deepcopy(snap)
    wrong.trainjobs[items[0].name]["status"]["conditions"] = [{"type": "Failed", "status": "True"}]
    assert any(p.startswith(f"TrainJob {items[0].name}") for p in problems(items, wrong))


def test_job_history_tells_a_job_never_created_from_one_deleted_while_active() -> None:
    from workload import JobHistory

    def job(name: str, uid: str, *conds: str, deleting: bool = False) -> Json:
        meta: Json = {"name": name, "uid": uid, "labels": {"jobset.sigs.k8s.io/restart-attempt": "0"}}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        return {"metadata": meta, "status": {"conditions": [{"type": c, "status": "True"} for c in conds]}}

    history = JobHistory()
    history.observe([job("tj-1-launcher-0", "u1"), job("tj-1-node-0", "u2")], 1.0)
    history.observe([job("tj-1-launcher-0", "u1", "Complete"), job("tj-1-node-0", "u2", deleting=True)], 2.0)
    history.observe([job("tj-1-launcher-0", "u1", "Complete")], 3.0)
    assert history.explain("tj-2-node-0") == "tj-2-node-0: never seen"
    assert history.explain("tj-1-node-0") == (
        "tj-1-node-0: uid u2 attempt 0 seen at 1.0 s, gone at 3.0 s (last seen active, terminating since 2.0 s)"
    )
    assert history.explain("tj-1-launcher-0").endswith("still there (Complete since 2.0 s)")
    # a Job recreated under the same name (a restart attempt) is a second sighting
    history.observe([job("tj-1-launcher-0", "u1", "Complete"), job("tj-1-node-0", "u3")], 4.0)
    assert history.explain("tj-1-node-0").count("uid ") == 2
    assert json.dumps(history.to_json())


def _mpi_converged(node: str) -> tuple[list[Any], Snapshot]:
    """One MPI TrainJob, Complete; its JobSet Completed by the launcher; the node Job ``node``
    (``absent``, ``complete``, ``active`` or ``terminating``)."""
    items = [i for i in build("ns", 20, 0, 0, V2_1) if i.flavour == "mpi"][:1]
    name = items[0].name
    tjs = {name: {"metadata": {"name": name, "uid": "t"}, "status": {"conditions": [_true("Complete")]}}}
    jobsets = {
        name: {
            "metadata": {
                "name": name,
                "uid": "js",
                "ownerReferences": [{"kind": "TrainJob", "uid": "t", "controller": True}],
            },
            "spec": {
                "replicatedJobs": [{"name": "launcher", "replicas": 1}, {"name": "node", "replicas": 1}],
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
            },
            "status": {"conditions": [_true("Completed")]},
        }
    }

    def job(rjob: str, *conds: str, deleting: bool = False) -> Json:
        meta: Json = {
            "name": f"{name}-{rjob}-0",
            "uid": f"job-{rjob}",
            "ownerReferences": [{"kind": "JobSet", "uid": "js", "controller": True}],
        }
        if deleting:
            meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        return {"metadata": meta, "status": {"conditions": [_true(c) for c in conds]}}

    jobs = {f"{name}-launcher-0": job("launcher", "Complete")}
    if node != "absent":
        jobs[f"{name}-node-0"] = job(
            "node", *(["Complete"] if node == "complete" else []), deleting=node == "terminating"
        )
    owned = {"ownerReferences": [{"kind": "TrainJob", "uid": "t", "controller": True}]}
    secrets = [{"metadata": {"name": f"{name}-mpi-ssh-auth", **owned}}]
    configmaps = [{"metadata": {"name": f"{name}-mpi-hostfile", **owned}}]
    return items, Snapshot(tjs, jobsets, jobs, {}, [], secrets, configmaps, [])


def _true(kind: str) -> Json:
    return {"type": kind, "status": "True"}


@pytest.mark.parametrize("node", ["absent", "complete", "terminating"])
def test_a_completed_mpi_jobset_may_lack_its_node_job_as_upstream_deletes_it(node: str) -> None:
    # the launcher won KWOK's coin toss: JobSet's finished path deleted the still-active node Job
    # (or the JobSet completed before its create succeeded): upstream's designed end state
    items, snap = _mpi_converged(node)
    assert problems(items, snap) == []


def test_a_finished_jobset_must_not_keep_an_active_job_nor_lack_a_counted_one() -> None:
    items, snap = _mpi_converged("active")
    name = items[0].name
    assert problems(items, snap) == [f"active Job {name}-node-0 of finished JobSet {name}"]
    items, snap = _mpi_converged("complete")
    del snap.jobs[f"{name}-launcher-0"]  # the Job the success policy counts cannot be missing
    assert problems(items, snap) == [f"missing Job {name}-launcher-0"]
    # a JobSet not finished (suspended, running) must have every Job
    items, snap = _mpi_converged("absent")
    snap.jobsets[name]["status"]["conditions"] = []
    assert f"missing Job {name}-node-0" in problems(items, snap)
