"""Exact strings of ``scheduling.x-k8s.io`` (scheduler-plugins v0.34.1-devel), named as upstream."""

from __future__ import annotations

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

PodGroupKind = "PodGroup"
ElasticQuotaKind = "ElasticQuota"

# The only link between a pod and its PodGroup.
PodGroupLabel = "scheduling.x-k8s.io/pod-group"

# PodGroup phases (``""`` is the initial state of a new object).
PodGroupPending = "Pending"
PodGroupScheduling = "Scheduling"
PodGroupRunning = "Running"
PodGroupFinished = "Finished"
PodGroupFailed = "Failed"
PodGroupUnknown = "Unknown"

PodGroupApprovedAnnotation = "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
ElasticQuotaApprovedAnnotation = "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"

# Events.
TimeoutReason = "Timeout"
TimeoutMessage = "schedule time longer than 48 hours"
SyncedReason = "Synced"
