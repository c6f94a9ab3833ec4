"""The committed OpenAPI snapshot is what the pinned kube-apiserver serves today."""

from __future__ import annotations

import json

from manager.envtest import Environment
from trainer.api.openapi import SNAPSHOT, definitions
from trainer.api.openapi.snapshot import GROUP_VERSIONS, OUT, ROOTS, closure


async def test_snapshot_matches_the_running_api_server(control_plane: Environment) -> None:
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
    status, version = await control_plane.request("GET", "/version")
    assert status == 200
    assert json.loads(OUT.read_text())["source"]["gitVersion"] == version["gitVersion"]
