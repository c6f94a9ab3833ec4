"""Strings ``jobset.x-k8s.io`` v0.12.0 adds to v0.10.1's (``trainer.api.jobset_constants``), named as upstream.

Everything v0.10.1 already had is unchanged in v0.12.0 and stays in ``trainer.api.jobset_constants``
(``constants.JobOwnerKey`` was renamed ``JobsIndexByJobSetKey``, same value).
"""

from __future__ import annotations

# Labels and annotations.
JobRestartAttemptKey = "jobset.sigs.k8s.io/job-restart-attempt"
InPlaceRestartAttemptKey = "jobset.sigs.k8s.io/in-place-restart-attempt"
DisableInPlaceRestartKey = "jobset.sigs.k8s.io/disable-in-place-restart"

# Field indexes of the manager (controller-runtime index names).
JobsIndexByJobSetKey = ".metadata.controller"
PodsIndexByJobSetKey = "podsIndexByJobSet"

# Condition types.
JobSetRestarting = "RestartingJobSet"

# Reasons and messages of the RestartingJobSet condition.
RestartingJobSetReasonDefaultFailurePolicy = "DefaultFailurePolicy"
RestartingJobSetReasonFailurePolicyFormat = "FailurePolicy_%s"
RestartingJobSetReasonJobsReady = "JobsReady"
RestartingJobSetReasonJobSetFailed = "JobSetFailed"
RestartingJobSetReasonJobSetCompleted = "JobSetCompleted"
RestartingJobSetReasonJobSetSuspended = "JobSetSuspended"
RestartingJobSetReasonJobsReadyMessage = "all jobs are ready"
RestartingJobSetReasonJobSetFailedMessage = "jobset failed"

# Event reasons and messages.
PVCCreationFailedReason = "PVCCreationFailed"
RestartJobActionReason = "RestartJobFailurePolicyAction"
RestartJobActionMessage = "applying RestartJob failure policy action"
RestartJobAndIgnoreMaxRestartsActionReason = "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
RestartJobAndIgnoreMaxRestartsActionMessage = "applying RestartJobAndIgnoreMaxRestarts failure policy action"

# Enum values.
RestartJob = "RestartJob"
RestartJobAndIgnoreMaxRestarts = "RestartJobAndIgnoreMaxRestarts"
InPlaceRestart = "InPlaceRestart"
RetentionPolicyDelete = "Delete"
RetentionPolicyRetain = "Retain"

# Bounds of the new API fields.
VolumeClaimPoliciesMaxItems = 50
JobRestartsMaxItems = 1024
