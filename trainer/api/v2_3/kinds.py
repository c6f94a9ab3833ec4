"""What ``crdgen`` generates for level v2.3: ``python -m trainer.api.crdgen --models=trainer.api.v2_3.kinds DIR``.

``CRD_KINDS`` are the kinds whose v2.3 schema differs from v2.1's (written to
``config/overlays/v2.3/crd``); ``SHARED_CRD_KINDS`` are installed at both levels with v2.1's CRDs
(``config/crd/bases``), so the level installs ``ALL_CRD_KINDS``. The embedded core types come
from ``OPENAPI_SNAPSHOT`` (Kubernetes 1.36: Trainer v2.3.0 builds on k8s.io/api v0.36.2, JobSet
v0.12.0 on v0.36.0, whose core types are the same).
"""

from __future__ import annotations

from trainer.api.base import KindModel
from trainer.api.openapi import SNAPSHOT_V1_36
from trainer.api.scheduling_v1alpha1 import ElasticQuota, PodGroup
from trainer.api.v2_3.jobset_v1alpha2 import JobSet
from trainer.api.v2_3.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob

CRD_KINDS: tuple[type[KindModel], ...] = (TrainJob, TrainingRuntime, ClusterTrainingRuntime, JobSet)
SHARED_CRD_KINDS: tuple[type[KindModel], ...] = (PodGroup, ElasticQuota)
ALL_CRD_KINDS: tuple[type[KindModel], ...] = (*CRD_KINDS, *SHARED_CRD_KINDS)
OPENAPI_SNAPSHOT = SNAPSHOT_V1_36
