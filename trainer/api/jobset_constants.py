"""Exact strings of ``jobset.x-k8s.io`` (JobSet v0.10.1), named as upstream names them."""

from __future__ import annotations

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "JobSet"

# Labels and annotations on child Jobs and their pod templates.
JobSetNameKey = "jobset.sigs.k8s.io/jobset-name"
JobSetUIDKey = "jobset.sigs.k8s.io/jobset-uid"
ReplicatedJobNameKey = "jobset.sigs.k8s.io/replicatedjob-name"
ReplicatedJobReplicas = "jobset.sigs.k8s.io/replicatedjob-replicas"
GlobalReplicasKey = "jobset.sigs.k8s.io/global-replicas"
JobIndexKey = "jobset.sigs.k8s.io/job-index"
JobGlobalIndexKey = "jobset.sigs.k8s.io/job-global-index"
JobKey = "jobset.sigs.k8s.io/job-key"
RestartsKey = "jobset.sigs.k8s.io/restart-attempt"
GroupNameKey = "jobset.sigs.k8s.io/group-name"
GroupReplicasKey = "jobset.sigs.k8s.io/group-replicas"
JobGroupIndexKey = "jobset.sigs.k8s.io/job-group-index"
CoordinatorKey = "jobset.sigs.k8s.io/coordinator"
PriorityKey = "jobset.sigs.k8s.io/priority"

# Exclusive placement.
ExclusiveKey = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NodeSelectorStrategyKey = "alpha.jobset.sigs.k8s.io/node-selector"
NamespacedJobKey = "alpha.jobset.sigs.k8s.io/namespaced-job"
NoScheduleTaintKey = "alpha.jobset.sigs.k8s.io/no-schedule"

JobSetControllerName = "jobset.sigs.k8s.io/jobset-controller"
JobCompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index"
MaxParallelism = 50

# Condition types.
JobSetCompleted = "Completed"
JobSetFailed = "Failed"
JobSetSuspended = "Suspended"
JobSetStartupPolicyInProgress = "StartupPolicyInProgress"
JobSetStartupPolicyCompleted = "StartupPolicyCompleted"

# Condition and event reasons and messages.
AllJobsCompletedReason = "AllJobsCompleted"
AllJobsCompletedMessage = "jobset completed successfully"
FailedJobsReason = "FailedJobs"
FailedJobsMessage = "jobset failed due to one or more job failures"
FailJobSetActionReason = "FailJobSetFailurePolicyAction"
FailJobSetActionMessage = "applying FailJobSet failure policy action"
ReachedMaxRestartsReason = "ReachedMaxRestarts"
ReachedMaxRestartsMessage = "jobset failed due to reaching max number of restarts"
RestartJobSetActionReason = "RestartJobSetFailurePolicyAction"
RestartJobSetActionMessage = "applying RestartJobSet failure policy action"
RestartJobSetAndIgnoreMaxRestartsActionReason = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
RestartJobSetAndIgnoreMaxRestartsActionMessage = (
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"
)
JobSetSuspendedReason = "SuspendedJobs"
JobSetSuspendedMessage = "jobset is suspended"
JobSetResumedReason = "ResumeJobs"
JobSetResumedMessage = "jobset is resumed"
InOrderStartupPolicyInProgressReason = "InOrderStartupPolicyInProgress"
InOrderStartupPolicyInProgressMessage = "in order startup policy is in progress"
InOrderStartupPolicyCompletedReason = "InOrderStartupPolicyCompleted"
InOrderStartupPolicyCompletedMessage = "in order startup policy has completed"
HeadlessServiceCreationFailedReason = "HeadlessServiceCreationFailed"
JobCreationFailedReason = "JobCreationFailed"
RestartingReason = "Restarting"
ExclusivePlacementViolationReason = "ExclusivePlacementViolation"
ExclusivePlacementViolationMessage = "Pod violated JobSet exclusive placement policy"

# Enum values.
DependencyReady = "Ready"
DependencyComplete = "Complete"
OperatorAll = "All"
OperatorAny = "Any"
FailJobSet = "FailJobSet"
RestartJobSet = "RestartJobSet"
RestartJobSetAndIgnoreMaxRestarts = "RestartJobSetAndIgnoreMaxRestarts"
Recreate = "Recreate"
BlockingRecreate = "BlockingRecreate"
AnyOrder = "AnyOrder"
InOrder = "InOrder"
TerminalStateCompleted = "Completed"
TerminalStateFailed = "Failed"

# Job failure reasons a failure-policy rule may name.
JobFailureReasons = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
