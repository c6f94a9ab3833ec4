"""Kubernetes OpenAPI v3 schemas of the core types our CRDs embed (generated snapshots).

One snapshot per Kubernetes minor whose core types an API level's CRDs embed:
``k8s-v1.34.json`` (the v2.1 models, read from kube-apiserver v1.34.4) and ``k8s-v1.36.json``
(the v2.3 models, read from the OpenAPI files committed in ``k8s.io/kubernetes`` v1.36.2).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

SNAPSHOT = "k8s-v1.34.json"
"""The snapshot of the v2.1 models (the default everywhere a snapshot is not named)."""
SNAPSHOT_V1_36 = "k8s-v1.36.json"
"""The snapshot of the v2.3 models (Trainer v2.3.0 and JobSet v0.12.0 build on k8s.io/api v0.36)."""


@functools.cache
def definitions(snapshot: str = SNAPSHOT) -> dict[str, Any]:
    """Component schemas by OpenAPI name, e.g. ``io.k8s.api.core.v1.PodTemplateSpec``."""
    text = resources.files(__package__).joinpath(snapshot).read_text()
    data: dict[str, Any] = json.loads(text)
    schemas: dict[str, Any] = data["schemas"]
    return schemas
