"""The OpenAPI snapshots read from ``k8s.io/kubernetes``' committed spec files (``--from-module``).

``k8s-v1.36.json`` must be exactly what the module of the version it names gives; and the method
reproduces ``k8s-v1.34.json`` (read from a running kube-apiserver v1.34.4) from the v1.34.4
module except for what Kubernetes leaves out of its committed files (``OpenAPIEnums=false``):
``enum`` lists and the "Possible enum values" paragraphs of descriptions.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from trainer.api import openapi
from trainer.api.openapi import snapshot


def committed(name: str) -> dict[str, Any]:
    return dict(json.loads(resources.files(openapi).joinpath(name).read_text()))


def test_v1_36_snapshot_is_what_its_module_gives() -> None:
    data = committed(openapi.SNAPSHOT_V1_36)
    version = data["source"]["gitVersion"]
    assert snapshot.output_path(version).name == openapi.SNAPSHOT_V1_36
    fresh = snapshot.from_module(version)
    assert snapshot.dumps(fresh) == snapshot.dumps(data), (
        f"regenerate with `python -m trainer.api.openapi.snapshot --from-module {version}`"
    )
    # The roots of the v2.3 models are all there.
    assert set(snapshot.ROOTS_V1_36) <= set(data["schemas"])


def test_v1_36_is_the_kubernetes_of_trainer_v2_3() -> None:
    """Trainer v2.3.0 pins k8s.io/api v0.36.2 (its go.mod); the snapshot is v1.36.2's."""
    assert committed(openapi.SNAPSHOT_V1_36)["source"]["gitVersion"] == "v1.36.2"


_ENUM_PARAGRAPH = re.compile(r"\n\nPossible enum values:\n(.|\n)*$")


def without_enums(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _ENUM_PARAGRAPH.sub("", value)
            if key == "description" and isinstance(value, str)
            else without_enums(value)
            for key, value in node.items()
            if key != "enum"
        }
    if isinstance(node, list):
        return [without_enums(v) for v in node]
    return node


def test_from_module_reproduces_the_v1_34_snapshot_but_for_enums() -> None:
    served = committed(openapi.SNAPSHOT)
    version = served["source"]["gitVersion"]
    assert version == "v1.34.4"
    from_files = snapshot.from_module(version)["schemas"]
    assert sorted(from_files) == sorted(served["schemas"])
    assert without_enums(from_files) == without_enums(served["schemas"])
    # What differs is exactly the enums the running server adds (and crdgen drops).
    differing = sorted(name for name in from_files if from_files[name] != served["schemas"][name])
    assert differing, "expected the served snapshot to carry enums"
    assert all("enum" in json.dumps(served["schemas"][name]) for name in differing)
    assert "Possible enum values" not in json.dumps(from_files)


def test_spec_file_names_and_minors() -> None:
    assert [snapshot.spec_file(p) for p in snapshot.GROUP_VERSIONS] == [
        "api__v1_openapi.json",
        "apis__batch__v1_openapi.json",
        "apis__autoscaling__v2_openapi.json",
    ]
    assert snapshot.minor("v1.36.2") == "v1.36"
    assert snapshot.ROOTS_BY_MINOR["v1.34"] == snapshot.ROOTS
