"""Regenerate the OpenAPI snapshots (``k8s-v1.34.json``, ``k8s-v1.36.json``).

Development tool, not imported at run time. Two sources, the same closure:

* ``python -m trainer.api.openapi.snapshot`` starts the pinned kube-apiserver (the envtest
  binaries, v1.34.4), reads the group-version documents whose types our CRDs embed and writes
  ``k8s-v1.34.json``: the transitive closure of ``ROOTS``, descriptions included (they become
  the CRDs' field documentation, as in upstream's CRDs).
* ``python -m trainer.api.openapi.snapshot --from-module v1.36.2`` reads the same documents
  from the OpenAPI v3 files committed in the ``k8s.io/kubernetes`` module of that version
  (``api/openapi-spec/v3``, fetched with ``go mod download``: no cluster, no build) and writes
  ``k8s-v<major>.<minor>.json`` with the roots of that minor (``ROOTS_BY_MINOR``).

The two sources agree except for enums: Kubernetes writes its committed files with
``OpenAPIEnums=false`` (``hack/update-openapi-spec.sh``), so they carry no ``enum`` lists and no
"Possible enum values" paragraphs in descriptions, which a running kube-apiserver adds. crdgen
drops ``enum`` anyway (controller-gen does not render ``+enum``), so the generated CRDs differ
only in the wording of those descriptions; for v1.34.4 everything else is identical
(``test/unit/api/test_openapi_snapshot_module.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
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
"""The roots of ``k8s-v1.34.json``: every core type the v2.1 models embed."""
ROOTS_V1_36 = (
    *ROOTS,
    # JobSet v0.12.0: spec.volumeClaimPolicies[].templates[]
    "io.k8s.api.core.v1.PersistentVolumeClaim",
    # Trainer v2.3.0: runtimePatches' PodSpecPatch and ContainerPatch
    "io.k8s.api.core.v1.PodSecurityContext",
    "io.k8s.api.core.v1.SecurityContext",
)
"""The roots of ``k8s-v1.36.json``: those of v1.34 plus what the v2.3 models embed."""
ROOTS_BY_MINOR = {"v1.34": ROOTS, "v1.36": ROOTS_V1_36}
OUT = Path(__file__).with_name("k8s-v1.34.json")
PREFIX = "#/components/schemas/"
KUBERNETES_MODULE = "k8s.io/kubernetes"


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


# -- from the k8s.io/kubernetes module ----------------------------------------------------------


def minor(version: str) -> str:
    """``v1.36.2`` -> ``v1.36``."""
    match = re.fullmatch(r"(v\d+\.\d+)\.\d+", version)
    if not match:
        raise ValueError(f"not a Kubernetes release version: {version!r} (e.g. v1.36.2)")
    return match.group(1)


def spec_file(path: str) -> str:
    """The committed file of a served document: ``/openapi/v3/apis/batch/v1`` -> ``apis__batch__v1_openapi.json``."""
    return path.removeprefix("/openapi/v3/").replace("/", "__") + "_openapi.json"


def module_dir(version: str) -> Path:
    """The ``k8s.io/kubernetes`` module of ``version`` in the Go module cache (downloaded when missing)."""
    if shutil.which("go") is None:
        raise RuntimeError("`go` is not on PATH: it fetches k8s.io/kubernetes from the module proxy")
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{KUBERNETES_MODULE}@{version}"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOFLAGS": "-modcacherw", "GOWORK": "off"},
        cwd="/",
    )
    if proc.returncode != 0:
        raise RuntimeError(f"go mod download {KUBERNETES_MODULE}@{version}: {proc.stdout}{proc.stderr}")
    return Path(json.loads(proc.stdout)["Dir"])


def from_module(
    version: str, roots: tuple[str, ...] | None = None, directory: Path | None = None
) -> dict[str, Any]:
    """The snapshot of ``version`` read from the module's committed OpenAPI v3 files."""
    if roots is None:
        try:
            roots = ROOTS_BY_MINOR[minor(version)]
        except KeyError:
            raise ValueError(f"no roots for {minor(version)}; known: {', '.join(ROOTS_BY_MINOR)}") from None
    spec_dir = (directory or module_dir(version)) / "api" / "openapi-spec" / "v3"
    schemas: dict[str, Any] = {}
    files = [spec_file(path) for path in GROUP_VERSIONS]
    for name in files:
        schemas.update(json.loads((spec_dir / name).read_text())["components"]["schemas"])
    return {
        "source": {
            "gitVersion": version,
            "module": f"{KUBERNETES_MODULE}@{version}",
            "files": [f"api/openapi-spec/v3/{name}" for name in files],
        },
        "schemas": closure(schemas, roots),
    }


def output_path(version: str) -> Path:
    return Path(__file__).with_name(f"k8s-{minor(version)}.json")


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--from-module"] and len(args) == 2:
        version = args[1]
        data = from_module(version)
        out = output_path(version)
    elif not args:
        data = asyncio.run(fetch())
        out = OUT
    else:
        print("usage: python -m trainer.api.openapi.snapshot [--from-module vX.Y.Z]", file=sys.stderr)
        return 2
    out.write_text(dumps(data))
    print(
        f"wrote {out} ({len(data['schemas'])} schemas from {data['source']['gitVersion']})", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
