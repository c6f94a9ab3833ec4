"""The framework's own CPU per mirrored object: ``mirror/mirror_ours.py``'s reconciler on the real
manager (cache, informers, work queue, controller, client) in this process, over a transport that
answers like an API server from memory.

``make bench-mirror`` measures the whole controller process against a real API server, where the
I/O (TLS, HTTP, JSON) is most of the cost and moves with the machine; this takes the I/O away.
The transport hands the watches their events as dicts (no bytes, no decoding), answers a POST
with the created object and publishes it to the watches, and lists nothing (watch-list, its
initial-events-end bookmark at once). What is left is what the framework does per object: two
watch events stored and dispatched, two requests queued, two reconciles with their cache reads
and copies, one create, plus the stand-in server's few copies per object (about a tenth).

Run: ``.venv/bin/python test/bench/bench_mirror_inproc.py [--n 10000] [--rounds 5]
[--first-pass-only]`` (in ``make bench-framework``). ``--first-pass-only`` still watches, stores
and dispatches the Secrets, to a handler that enqueues nothing: the difference from a run without
it is what the level-triggered second pass (the Secret's event reconciling its ConfigMap again,
as controller-runtime's ``Owns`` does) costs. Each round is a process of its own (nothing of an earlier round left
for the collector to walk); CPU is that process's (``time.process_time``) from the first
ConfigMap to the last reconcile.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent / "mirror"))

from mirror_ours import CONFIGMAP, SECRET, Mirror

import manager.cluster
from manager import Builder, Manager, Options, Request, Result, log, loops
from manager.cache.cache import CacheOptions
from manager.config import RestConfig
from manager.controller import Funcs
from manager.meta.object import json_copy

NAMESPACE = "bench"
WORKERS = 16
IN_FLIGHT = 50
"""ConfigMaps created per turn of the loop, as ``framework.py``'s creates in flight."""

DISCOVERY = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {"name": plural, "singularName": kind.lower(), "namespaced": True, "kind": kind, "verbs": verbs}
        for plural, kind in (("configmaps", "ConfigMap"), ("secrets", "Secret"))
        for verbs in (["create", "delete", "get", "list", "patch", "update", "watch"],)
    ],
}


class MemoryServer:
    """What the API server keeps and tells: objects by resource, and each resource's watches."""

    def __init__(self) -> None:
        self.versions = itertools.count(1)
        self.objects: dict[str, dict[str, Any]] = {"configmaps": {}, "secrets": {}}
        self.watches: dict[str, list[asyncio.Queue[dict[str, Any]]]] = {"configmaps": [], "secrets": []}
        self.creates = 0

    def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        stored = json_copy(obj)  # the server's own object, as decoding the request gives
        meta = stored["metadata"]
        version = str(next(self.versions))
        meta.update(
            uid=f"uid-{version}",
            resourceVersion=version,
            creationTimestamp="2026-12-07T10:00:00Z",
            managedFields=[{"manager": "bench", "operation": "Update", "apiVersion": "v1"}],
        )
        self.objects[resource][meta["name"]] = stored
        self.creates += 1
        for queue in self.watches[resource]:
            queue.put_nowait({"type": "ADDED", "object": json_copy(stored)})
        return json_copy(stored)


class MemoryTransport:
    """``manager.client.rest.RestTransport``'s surface, answered by a ``MemoryServer``."""

    server: MemoryServer

    def __init__(self, config: RestConfig) -> None:
        self.config = config
        self.host = "memory"

    async def aclose(self) -> None:
        return None

    async def request(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        await asyncio.sleep(0)  # a request's answer comes on a later turn of the loop
        if method == "GET" and path == "/api/v1":
            return DISCOVERY
        resource = path.rstrip("/").rsplit("/", 1)[-1]
        if method == "POST" and resource in self.server.objects:
            return self.server.create(resource, options["body"])
        raise RuntimeError(f"the in-memory server does not answer {method} {path}")

    async def request_bytes(self, method: str, path: str, **options: Any) -> bytes:
        version = str(next(self.server.versions))
        return orjson.dumps({"kind": "List", "metadata": {"resourceVersion": version}, "items": []})

    async def stream(
        self, path: str, *, params: dict[str, Any] | None = None, inactivity_timeout: float | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        resource = path.rstrip("/").rsplit("/", 1)[-1]
        kind = {"configmaps": "ConfigMap", "secrets": "Secret"}[resource]
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.server.watches[resource].append(queue)
        try:
            if params and params.get("sendInitialEvents"):
                meta = {
                    "resourceVersion": str(next(self.server.versions)),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                }
                yield {"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": kind, "metadata": meta}}
            while True:
                yield await queue.get()
        finally:
            self.server.watches[resource].remove(queue)


def configmap(i: int) -> dict[str, Any]:
    name = f"cm-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "mirror-bench"}},
        "data": {"index": str(i), "config.yaml": f"replicas: {i % 7}\nname: {name}\n"},
    }


async def one_round(n: int, *, first_pass_only: bool = False) -> float:
    """Microseconds of CPU per mirrored object, from the first ConfigMap to the last reconcile."""
    server = MemoryServer()
    MemoryTransport.server = server
    manager.cluster.RestTransport = MemoryTransport  # type: ignore[misc,assignment]
    log.configure(level="INFO", fmt="json", stream=io.StringIO())
    options = CacheOptions(default_namespaces=[NAMESPACE])
    async with manager.cluster.Cluster(RestConfig(host="https://memory"), cache_options=options) as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        mirror = Mirror(mgr.client)
        reconcile = mirror.reconcile
        reconciles = 0

        async def counted(req: Request) -> Result | None:
            nonlocal reconciles
            reconciles += 1
            return await reconcile(req)

        mirror.reconcile = counted  # type: ignore[method-assign]
        builder = Builder(mgr).for_(CONFIGMAP).with_options(max_concurrent_reconciles=WORKERS)
        # first pass only: the Secrets are still watched, stored and dispatched, to a handler that
        # enqueues nothing, so the difference is the level-triggered second pass alone
        (builder.watches(SECRET, Funcs()) if first_pass_only else builder.owns(SECRET)).complete(mirror)
        passes = 1 if first_pass_only else 2
        running = asyncio.create_task(mgr.run())
        try:
            await until(lambda: all(server.watches.values()), "the manager's two watches open")
            # as framework.py's warm-up: one ConfigMap mirrored proves the controller is running
            server.create("configmaps", configmap(-1))
            await until(
                lambda: reconciles >= passes and server.creates >= 2, "the warm-up ConfigMap mirrored"
            )
            reconciles, server.creates = 0, 0
            objects = [configmap(i) for i in range(n)]
            cpu = time.process_time()
            for start in range(0, n, IN_FLIGHT):
                for obj in objects[start : start + IN_FLIGHT]:
                    server.create("configmaps", obj)
                await asyncio.sleep(0)
            # each ConfigMap is reconciled once for itself and (but for the first pass only) once
            # for its Secret's event
            await until(
                lambda: reconciles >= passes * n and server.creates >= 2 * n, f"{passes * n} reconciles"
            )
            return (time.process_time() - cpu) / n * 1e6
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)


async def until(condition: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        await asyncio.sleep(0.001)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000, help="ConfigMaps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--first-pass-only",
        action="store_true",
        help="Secrets watched and stored, their events enqueueing nothing: without the second pass",
    )
    parser.add_argument("--one", action="store_true", help="run one round here and print its figure")
    args = parser.parse_args()
    if args.one:
        print(loops.run(one_round(args.n, first_pass_only=args.first_pass_only)))
        return
    results = []
    for r in range(args.rounds):
        argv = [sys.executable, __file__, "--one", f"--n={args.n}"]
        argv += ["--first-pass-only"] if args.first_pass_only else []
        us = float(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()[-1])
        results.append(us)
        print(f"round {r}: {us:6.1f} us of CPU per mirrored object", flush=True)
    print(f"median: {statistics.median(results):.1f} us of CPU per mirrored object ({args.n} per round)")


if __name__ == "__main__":
    main()
