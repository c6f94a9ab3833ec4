"""The framework scenario's I/O alone, in Python: what ``mirror_ours.py`` sends and watches, without
the framework.

A watch on the namespace's ConfigMaps; for each one added, a POST of its Secret (``data``
base64-encoded, the ConfigMap as controller owner), at most ``--workers`` in flight; a watch on the
Secrets, each event decoded and kept by name. All of it on this repository's REST transport
(``manager.client.rest``: the HTTP/1.1 pool for the POSTs, aiohttp for the watches, orjson) and
uvloop's event loop with the cyclic collector paced as the manager paces it
(``manager.collector.tuned``). No cache, no work queue, no reconcile, no copy, no second
pass when the Secret's event arrives: the side ``framework.py`` names ``python-io``. Ours over it
is what the framework itself costs per object; kopf or controller-runtime over it, how far each is
from what Python's I/O allows.

    python test/bench/mirror/mirror_io.py --namespace bench --workers 16   # KUBECONFIG set
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

# the same Secret data as ours (run as a script, this directory is on the path)
from mirror_ours import encoded

from manager import collector, loops
from manager.client.errors import ApiError
from manager.client.rest import RestTransport
from manager.config import load_kubeconfig


def secret_of(cm: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = cm["metadata"]
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": meta["name"], "namespace": namespace, "ownerReferences": [owner]},
        "type": "Opaque",
        "data": encoded(cm.get("data")),
    }


async def main(namespace: str, workers: int) -> None:
    rest = RestTransport(await load_kubeconfig())
    lanes = asyncio.Semaphore(workers)
    secrets: dict[str, dict[str, Any]] = {}
    writes: set[asyncio.Task[None]] = set()

    async def write(cm: dict[str, Any]) -> None:
        async with lanes:
            try:
                await rest.request(
                    "POST", f"/api/v1/namespaces/{namespace}/secrets", body=secret_of(cm, namespace)
                )
            except ApiError as err:
                print(f"POST secret {cm['metadata']['name']}: {err}", file=sys.stderr)

    async def configmaps() -> None:
        params = {"watch": "true", "allowWatchBookmarks": "true"}
        async for event in rest.stream(f"/api/v1/namespaces/{namespace}/configmaps", params=params):
            if event["type"] == "ADDED":
                task = asyncio.create_task(write(event["object"]))
                writes.add(task)
                task.add_done_callback(writes.discard)

    async def secret_events() -> None:
        params = {"watch": "true", "allowWatchBookmarks": "true"}
        async for event in rest.stream(f"/api/v1/namespaces/{namespace}/secrets", params=params):
            if event["type"] in ("ADDED", "MODIFIED"):
                obj = event["object"]
                secrets[obj["metadata"]["name"]] = obj

    try:
        with collector.tuned():
            async with asyncio.TaskGroup() as group:
                group.create_task(configmaps())
                group.create_task(secret_events())
    finally:
        await rest.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args()
    loops.run(main(args.namespace, args.workers))
