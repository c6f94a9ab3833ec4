"""Restart kube-apiserver under a running informer: it reconnects (with backoff), relists, and
converges on the server's state, including changes made while it was disconnected."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from manager.cache.informer import SharedInformer
from manager.client import NotFound, RequestError
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import wait_http
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
NS = "default"


def cm(name: str, value: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"v": value},
    }


async def _restart_apiserver(env: Environment) -> None:
    proc = next(p for p in env.processes if p.name == "kube-apiserver")
    await asyncio.to_thread(proc.stop)
    proc.start(detached=False)
    await wait_http(proc, f"{env.url}/readyz", context=env.ssl_context(client_cert=False), timeout=120)


async def test_informer_survives_apiserver_restart(tmp_path: Path) -> None:
    async with Environment(tmp_path / "env") as env:
        config = await load_kubeconfig(env.kubeconfig)
        async with Cluster(config) as cluster:
            c = cluster.api_reader
            for name in ("keep", "change", "gone"):
                await c.create(cm(name))
            mapping = await cluster.mapper.mapping(CONFIGMAP)
            informer = SharedInformer(c, mapping, namespaces=[NS])
            deleted: list[str] = []

            class OnDelete:
                def on_add(self, obj: dict[str, Any], initial: bool) -> None:
                    pass

                def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
                    pass

                def on_delete(self, obj: dict[str, Any]) -> None:
                    deleted.append(obj["metadata"]["name"])

            informer.add_event_handler(OnDelete())
            task = asyncio.create_task(informer.run())
            try:
                await asyncio.wait_for(informer.wait_for_sync(), 30)
                await _restart_apiserver(env)
                # Change things right away, most likely before the reflector's backoff ends.
                await c.delete(cm("gone"))
                changed = await c.get(CONFIGMAP, "change", NS)
                changed["data"] = {"v": "2"}
                await c.update(changed)
                await c.create(cm("new"))

                async def converged() -> bool:
                    try:
                        live = {
                            o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                            for o in await c.list(CONFIGMAP, namespace=NS)
                        }
                    except (RequestError, NotFound):
                        return False
                    cached = {
                        o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                        for o in informer.store.values()
                    }
                    return live == cached

                await eventually(
                    converged, timeout=120, interval=0.5, message="cache never converged after restart"
                )
                assert "gone" in deleted
                reflector = informer.reflectors[0]
                assert reflector.watches >= 2
                # still live afterwards
                await c.create(cm("after"))
                await eventually(lambda: informer.store.get(f"{NS}/after") is not None, timeout=30)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
