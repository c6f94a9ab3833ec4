"""Regenerate ../flux_go_v2_3_0.json from Trainer v2.3.0's own Flux plugin (main.go here).

Run from this directory: ``python generate.py`` (Go >= 1.26; the module cache of the
conformance runner's Go originals suffices: GOPROXY=off).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _container(c: dict[str, Any]) -> dict[str, Any]:
    """A PodSet container as the JSON our ContainerInfo maps to (Go's empty fields left out)."""
    out: dict[str, Any] = {"name": c["Name"]}
    for key, field in (
        ("image", "Image"),
        ("command", "Command"),
        ("env", "Env"),
        ("volumeMounts", "VolumeMounts"),
    ):
        if c[field]:
            out[key] = c[field]
    return out


def main() -> None:
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
    raw = json.loads(
        subprocess.run(["go", "run", "."], cwd=HERE, env=env, check=True, capture_output=True).stdout
    )
    fixtures = {}
    for name, case in raw.items():
        objects = {}
        for obj in case["objects"]:
            data = obj["data"]
            if obj["kind"] == "Secret":
                data = {k: base64.b64decode(v).decode() for k, v in data.items()}
            objects[obj["kind"]] = {"metadata": obj["metadata"], "data": data}
        fixtures[name] = {
            "input": case["case"],
            "command": case["command"],
            "args": case["args"],
            "initContainers": [_container(c) for c in case["initContainers"]],
            "containers": [_container(c) for c in case["containers"]],
            "volumes": case["volumes"],
            "objects": objects,
        }
    target = HERE.parent / "flux_go_v2_3_0.json"
    target.write_text(json.dumps(fixtures, indent=1, ensure_ascii=False, sort_keys=True))


if __name__ == "__main__":
    main()
