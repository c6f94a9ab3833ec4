"""Regenerate ``k8s-v1.34.json`` from a real kube-apiserver's ``/openapi/v3``.

Development tool, not imported at run time: it starts the pinned kube-apiserver (the envtest
binaries), reads the group-version documents whose types our CRDs embed and keeps the
transitive closure of the roots below, descriptions included (they become the CRDs' field
documentation, as in upstream's CRDs). Run: ``python -m trainer.api.openapi.snapshot``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

GROUP_VERSIONS = ("/openapi/v3/api/v1", "/openapi/v3/apis/batch/v1", "/openapi/v3/apis/autoscaling/v2")
ROOTS = (
    "io.k8s.api.batch.v1.JobTemplateSpec",
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.Volume",
    "io.k8s.api.core.v1.VolumeMount",
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.api.core.v1.Toleration",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.PodSchedulingGate",
    "io.k8s.api.autoscaling.v2.MetricSpec",
)
OUT = Path(__file__).with_name("k8s-v1.34.json")
PREFIX = "#/components/schemas/"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].removeprefix(PREFIX)] if "$ref" in node else []
        for value in node.values():
            found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def closure(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    """The named schemas reachable from ``roots``."""
    kept: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        kept[name] = schemas[name]
        pending.extend(_refs(kept[name]))
    return dict(sorted(kept.items()))


async def fetch() -> dict[str, Any]:
    from manager.envtest import Environment  # a dev-time dependency only

    schemas: dict[str, Any] = {}
    async with Environment() as env:
        _, version = await env.request("GET", "/version")
        for path in GROUP_VERSIONS:
            status, body = await env.request("GET", path)
            if status != 200:
                raise SystemExit(f"GET {path} answered {status}")
            schemas.update(body["components"]["schemas"])
    return {
        "source": {"gitVersion": version["gitVersion"], "paths": list(GROUP_VERSIONS)},
        "schemas": closure(schemas, ROOTS),
    }


def main() -> int:
    data = asyncio.run(fetch())
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(
        f"wrote {OUT} ({len(data['schemas'])} schemas from {data['source']['gitVersion']})", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
