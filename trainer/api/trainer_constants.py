"""Exact strings of ``trainer.kubeflow.org`` (Kubeflow Trainer v2.1.0), named as upstream."""

from __future__ import annotations

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

TrainJobKind = "TrainJob"
TrainingRuntimeKind = "TrainingRuntime"
ClusterTrainingRuntimeKind = "ClusterTrainingRuntime"

# Condition types, reasons and messages on TrainJob.
TrainJobSuspended = "Suspended"
TrainJobComplete = "Complete"
TrainJobFailed = "Failed"
TrainJobSuspendedReason = "Suspended"
TrainJobResumedReason = "Resumed"
TrainJobRuntimeNotSupportedReason = "TrainingRuntimeNotSupported"
TrainJobSuspendedMessage = "TrainJob is suspended"
TrainJobResumedMessage = "TrainJob is resumed"
TrainJobResourcesCreationFailedReason = "TrainJobResourcesCreationFailed"

# managedBy values.
TrainJobControllerName = "trainer.kubeflow.org/trainjob-controller"
MultiKueueControllerName = "kueue.x-k8s.io/multikueue"

# Labels, annotations, finalizers.
LabelTrainJobAncestor = "trainer.kubeflow.org/trainjob-ancestor-step"
LabelSupport = "trainer.kubeflow.org/support"
SupportDeprecated = "deprecated"
LabelFramework = "trainer.kubeflow.org/framework"
ResourceInUseFinalizer = "trainer.kubeflow.org/resource-in-use"
RuntimeDeprecationPolicyURL = (
    "https://www.kubeflow.org/docs/components/trainer/operator-guides/runtime/#runtime-deprecation-policy"
)

# Ancestor label values and well-known replicated-job / container names.
DatasetInitializer = "dataset-initializer"
ModelInitializer = "model-initializer"
AncestorTrainer = "trainer"
Node = "node"
Launcher = "launcher"

# Enum values.
MPIImplementationOpenMPI = "OpenMPI"
MPIImplementationIntel = "Intel"
MPIImplementationMPICH = "MPICH"
NumProcPerNodeAuto = "auto"
NumProcPerNodeCPU = "cpu"
NumProcPerNodeGPU = "gpu"
VolcanoNetworkTopologyHard = "hard"
VolcanoNetworkTopologySoft = "soft"

# Server-side apply field manager.
FieldManager = "trainer"

# status.state (TrainJobState gate): the lifecycle states the controller derives.
TrainJobStatePending = "Pending"
TrainJobStateSuspended = "Suspended"
TrainJobStateRunning = "Running"
TrainJobStateComplete = "Complete"
TrainJobStateFailed = "Failed"
TrainJobStates = (
    TrainJobStatePending,
    TrainJobStateSuspended,
    TrainJobStateRunning,
    TrainJobStateComplete,
    TrainJobStateFailed,
)
