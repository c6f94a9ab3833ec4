"""Strings ``trainer.kubeflow.org`` v2.3.0 adds to or changes from v2.1.0's, named as upstream.

Everything else (kinds, condition types, the other reasons and messages, labels, finalizers,
managedBy values) is unchanged and stays in ``trainer.api.trainer_constants``. Framework strings
(env names, volumes, ports of the JAX, XGBoost and Flux plugins) belong to their plugins.
"""

from __future__ import annotations

# The "Failed" condition's reason and message when spec.activeDeadlineSeconds has passed
# (TrainJobDeadlineExceededReason in the API package, ...Message in pkg/constants).
TrainJobDeadlineExceededReason = "DeadlineExceeded"
TrainJobDeadlineExceededMessage = "TrainJob exceeded its active deadline"

# Changed in v2.2: the deprecation policy moved to the Trainer docs site.
RuntimeDeprecationPolicyURL = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)

# The CEL messages of the v2.3 CRDs users see on a 422.
FieldImmutableMessage = "field is immutable"
OnePolicyMessage = "Only one of the policy can be configured"
StorageUriMessage = "storageUri may be empty, or it must be a valid URI (scheme://...)"
FluxNumProcPerNodeMessage = "NumProcPerNode in fluxPolicy must be >= 1"
EnvInjectionNodeContainerMessage = (
    "containerNames must not include the main node container because PET_* envs are always injected into it"
)

# Bounds of the v2.3 API (kubebuilder markers).
RuntimePatchesMaxItems = 16
ReplicatedJobPatchesMaxItems = 100
EnvMaxItems = 128
CommandMaxItems = 128
CommandItemMaxLength = 1048576
ImageMaxLength = 500
NameMaxLength = 253
StorageUriMaxLength = 2048
SSHAuthMountPathMaxLength = 4096
ConditionsMaxItems = 8
JobsStatusMaxItems = 100
EnvInjectionTargetsMaxItems = 16
EnvInjectionContainerNamesMaxItems = 8
EnvInjectionContainerNameMaxLength = 63
