"""The framework scenario's reconciler on this repository's ``manager/`` framework.

Mirrors every ConfigMap of one namespace into a Secret of the same name (``data`` base64-encoded,
the ConfigMap as controller owner), as ``mirror_kopf.py`` and ``mirror-go/main.go`` do on kopf
and on controller-runtime. Reads come from the cache (``For`` ConfigMaps, ``Owns`` Secrets),
writes go to the API server (``create_or_update``). Client-side rate limiting off, as
controller-runtime's default.

    python test/bench/mirror/mirror_ours.py --namespace bench --workers 16   # KUBECONFIG set
"""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

from manager import Builder, GroupVersionKind, Manager, Options, Request, Result, loops
from manager.cache.cache import CacheOptions
from manager.client.errors import NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.controller_util import create_or_update, set_controller_reference
from manager.manager import signals

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
SECRET = GroupVersionKind("", "v1", "Secret")


def encoded(data: dict[str, str] | None) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}


class Mirror:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def reconcile(self, req: Request) -> Result | None:
        try:
            cm = await self.client.get(CONFIGMAP, req.name, req.namespace)
        except NotFound:
            return None  # deleted: the Secret goes with it (owner reference)
        desired = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": req.name, "namespace": req.namespace},
        }

        def mutate(secret: dict[str, Any]) -> None:
            secret["data"] = encoded(cm.get("data"))
            secret.setdefault("type", "Opaque")
            set_controller_reference(cm, secret)

        await create_or_update(self.client, desired, mutate)
        return None


async def main(namespace: str, workers: int) -> int:
    config = await load_kubeconfig()
    async with Cluster(config, cache_options=CacheOptions(default_namespaces=[namespace])) as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        (
            Builder(mgr)
            .for_(CONFIGMAP)
            .owns(SECRET)
            .with_options(max_concurrent_reconciles=workers)
            .complete(Mirror(mgr.client))
        )
        return await signals.run_until_signalled(mgr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args()
    sys.exit(loops.run(main(args.namespace, args.workers)))
