"""The framework scenario's reconciler on kopf (PyPI ``kopf``, installed by ``.[bench]``).

Mirrors every ConfigMap of one namespace into a Secret of the same name, as ``mirror_ours.py``
does on ``manager/``. The cheapest kopf idiom: ``@kopf.on.event`` (every watch event, no
finalizer, no progress annotations patched onto the ConfigMap), the Secret created with
kubernetes-asyncio (the async official client) and adopted with ``kopf.adopt``
(kopf keeps no cache: create, and on 409 a merge patch); kopf runs
``--standalone`` (no peering) on one namespace at its defaults (one worker per object, no
``worker_limit``: a limit makes each object wait for a worker's 5 s idle timeout), on the event
loop ``kopf run`` picks: uvloop's where it is installed (kopf/_kits/loops.py), as it is here,
a dependency of ours.

    python test/bench/mirror/mirror_kopf.py --namespace bench --workers 16   # KUBECONFIG set
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
from typing import Any

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

API: dict[str, client.CoreV1Api] = {}


def encoded(data: dict[str, str] | None) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.enabled = False  # no k8s Events for handler outcomes
    await config.load_kube_config()
    API["core"] = client.CoreV1Api(client.ApiClient())


@kopf.on.event("", "v1", "configmaps")
async def mirror(event: dict[str, Any], body: kopf.Body, name: str, namespace: str, **_: Any) -> None:
    if event["type"] == "DELETED":
        return  # the Secret goes with it (owner reference)
    data = encoded(body.get("data"))
    api = API["core"]
    secret: dict[str, Any] = {"metadata": {"name": name}, "type": "Opaque", "data": data}
    kopf.adopt(secret, owner=body)
    try:  # kopf keeps no cache: create, and on a conflict patch (idempotent), no read first
        await api.create_namespaced_secret(namespace, secret)
    except ApiException as err:
        if err.status != 409:
            raise
        await api.patch_namespaced_secret(name, namespace, {"data": data})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="bench")
    parser.add_argument(
        "--workers", type=int, default=16, help="ignored: kopf runs one worker per object (its default)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    operator = kopf.operator(standalone=True, namespaces=[args.namespace], clusterwide=False)
    try:
        import uvloop
    except ImportError:
        asyncio.run(operator)
    else:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(operator)
