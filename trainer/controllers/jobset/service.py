"""The headless Service that gives pods stable DNS names (docs/behaviour/jobset.md §2.8)."""

from __future__ import annotations

from typing import Any

from trainer.api import jobset_constants as c
from trainer.controllers.jobset.jobs import meta, name_of, owner_reference, spec_of, subdomain_of

Object = dict[str, Any]


def construct_headless_service(js: Object) -> Object:
    """Named after the subdomain, selecting every pod of the JobSet; no ports, no labels."""
    network = spec_of(js).get("network") or {}
    publish = network.get("publishNotReadyAddresses")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": subdomain_of(js),
            "namespace": str(meta(js).get("namespace") or ""),
            "ownerReferences": [owner_reference(js)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {c.JobSetNameKey: name_of(js)},
            "publishNotReadyAddresses": True if publish is None else bool(publish),
        },
    }
