"""What ``crdgen`` generates for level v2.1 (its default): ``python -m trainer.api.crdgen DIR``.

The same three names as ``trainer.api.v2_3.kinds``, so a level names its models by module
(``ApiLevel.api_models``) and crdgen reads any level alike: ``CRD_KINDS`` (the CRDs written for the
level, ``config/crd/bases``), ``ALL_CRD_KINDS`` (every CRD the level installs; all of them are
its own here) and ``OPENAPI_SNAPSHOT`` (the embedded core types: Kubernetes 1.34, kube-apiserver
v1.34.4; Trainer v2.1.0 builds on k8s.io/api v0.34.1).
"""

from __future__ import annotations

from trainer.api.base import KindModel
from trainer.api.jobset_v1alpha2 import JobSet
from trainer.api.openapi import SNAPSHOT
from trainer.api.scheduling_v1alpha1 import ElasticQuota, PodGroup
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob

# Every kind we install, in a stable order.
CRD_KINDS: tuple[type[KindModel], ...] = (
    TrainJob,
    TrainingRuntime,
    ClusterTrainingRuntime,
    JobSet,
    PodGroup,
    ElasticQuota,
)
ALL_CRD_KINDS: tuple[type[KindModel], ...] = CRD_KINDS
OPENAPI_SNAPSHOT = SNAPSHOT
