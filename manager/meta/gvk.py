"""The GroupVersionKinds of the built-in (core and batch) kinds the controllers use."""

from __future__ import annotations

from manager.scheme import GroupVersionKind

__all__ = [
    "CONFIGMAP",
    "JOB",
    "LIMITRANGE",
    "NODE",
    "POD",
    "PRIORITYCLASS",
    "RUNTIMECLASS",
    "SECRET",
    "SERVICE",
]

POD = GroupVersionKind("", "v1", "Pod")
NODE = GroupVersionKind("", "v1", "Node")
SERVICE = GroupVersionKind("", "v1", "Service")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
SECRET = GroupVersionKind("", "v1", "Secret")
LIMITRANGE = GroupVersionKind("", "v1", "LimitRange")
JOB = GroupVersionKind("batch", "v1", "Job")
RUNTIMECLASS = GroupVersionKind("node.k8s.io", "v1", "RuntimeClass")
PRIORITYCLASS = GroupVersionKind("scheduling.k8s.io", "v1", "PriorityClass")
