"""The committed v1.34 OpenAPI snapshot (the v2.1 models' core types) is what kube-apiserver
v1.34.4 serves: run on that control plane by ``make test-k8s-matrix``."""

from __future__ import annotations

import json

import pytest

from manager.envtest import Environment
from trainer.api.openapi import SNAPSHOT, definitions
from trainer.api.openapi.snapshot import GROUP_VERSIONS, OUT, ROOTS, closure


@pytest.mark.k8s_v1_34
async def test_snapshot_matches_the_running_api_server(control_plane: Environment) -> None:
    status, version = await control_plane.request("GET", "/version")
    assert status == 200
    assert json.loads(OUT.read_text())["source"]["gitVersion"] == version["gitVersion"], (
        "run on the snapshot's control plane: make test-k8s-matrix"
    )
    schemas: dict[str, object] = {}
    for path in GROUP_VERSIONS:
        status, body = await control_plane.request("GET", path)
        assert status == 200, body
        schemas.update(body["components"]["schemas"])
    live = closure(schemas, ROOTS)
    assert OUT.name == SNAPSHOT
    assert json.dumps(live, sort_keys=True) == json.dumps(definitions(), sort_keys=True), (
        "regenerate with `python -m trainer.api.openapi.snapshot`"
    )
