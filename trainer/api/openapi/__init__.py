"""Kubernetes OpenAPI v3 schemas of the core types our CRDs embed (a generated snapshot)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

SNAPSHOT = "k8s-v1.34.json"


@functools.cache
def definitions() -> dict[str, Any]:
    """Component schemas by OpenAPI name, e.g. ``io.k8s.api.core.v1.PodTemplateSpec``."""
    text = resources.files(__package__).joinpath(SNAPSHOT).read_text()
    data: dict[str, Any] = json.loads(text)
    schemas: dict[str, Any] = data["schemas"]
    return schemas
