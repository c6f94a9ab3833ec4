"""Level v2.1's build steps (Trainer v2.1.0, ``RuntimeBuild``): the TrainJob's
``resourcesPerNode`` replaces the trainer container's resources in the JobSet builder, every
PodSet has the endpoints of one replica, and the JobSet plugin's ``Build`` writes the PodSets'
counts by index."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from manager.meta.object import Json
from trainer.api.trainer_v1alpha1 import MLPolicy, Trainer, TrainJob
from trainer.runtime.info import ContainerInfo, Info
from trainer.runtime.resources import typed_resource_requirements

__all__ = ["REPLACE_IN_BUILDER", "ReplaceInBuilder"]


class ReplaceInBuilder:
    """``RuntimeBuild`` of v2.1."""

    def node_resources(self, trainjob: TrainJob, jobset_spec: Json, ml_policy: MLPolicy | None) -> None:
        """Nothing: v2.1.0's ``newRuntimeInfo`` leaves the runtime's resources as they are."""

    def jobset_node_resources(self, container: Json, trainer: Trainer) -> None:
        """The builder's ``WithResources``: the TrainJob's limits and requests replace the
        container's resources whole (the runtime's other resource names are gone)."""
        resources = trainer.resources_per_node or {}
        if resources.get("limits") is None and resources.get("requests") is None:
            return
        container["resources"] = typed_resource_requirements(
            {k: copy.deepcopy(resources[k]) for k in ("limits", "requests") if resources.get(k) is not None}
        )

    def endpoint_replicas(self, rjob: Json) -> int:
        """One: v2.1.0 names the pods of replica ``DefaultJobReplicas - 1`` = 0 only."""
        return 1

    def sync_parallel_count(self, builders: Sequence[object], info: Info | None) -> None:
        """Nothing before the builders: the JobSet plugin's ``Build`` writes the counts."""

    def build_counts(self, jobset_spec: Json, info: Info) -> None:
        """Each PodSet's count into the parallelism and completions of the job of its index."""
        rjobs = jobset_spec.get("replicatedJobs") or []
        for index, pod_set in enumerate(info.template_spec.pod_sets):
            if index >= len(rjobs):
                break
            job_spec = rjobs[index].setdefault("template", {}).setdefault("spec", {})
            job_spec["parallelism"] = pod_set.count_or_one()
            job_spec["completions"] = pod_set.count_or_one()

    def torch_env_targets(self, info: Info) -> list[ContainerInfo]:
        """None: v2.1.0's torch policy has no ``envInjection``."""
        return []

    def volume_claim_policies(self, jobset_spec: Json) -> None:
        """Nothing: JobSet v0.10.1 has no ``volumeClaimPolicies``."""


REPLACE_IN_BUILDER = ReplaceInBuilder()
