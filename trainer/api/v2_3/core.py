"""Core types the v2.3 models embed beyond those of ``trainer.api.core`` (Kubernetes 1.36 schemas).

Their schemas are only in ``k8s-v1.36.json`` (``snapshot.ROOTS_V1_36``).
"""

from __future__ import annotations

from typing import Annotated

from manager.meta.object import Json
from trainer.api.base import CoreRef

PersistentVolumeClaim = Annotated[Json, CoreRef("io.k8s.api.core.v1.PersistentVolumeClaim")]
PodSecurityContext = Annotated[Json, CoreRef("io.k8s.api.core.v1.PodSecurityContext")]
SecurityContext = Annotated[Json, CoreRef("io.k8s.api.core.v1.SecurityContext")]
