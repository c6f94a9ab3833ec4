"""Level v2.3's build steps (Trainer v2.3.0, ``RuntimeBuild``; docs/behaviour/trainer.md §12.14).

* ``resourcesPerNode`` merged per resource name: ``newRuntimeInfo`` strategic-merges the
  TrainJob's ``resourcesPerNode`` onto the resources of the runtime's ``node`` container
  (``trainingruntime.MergeResourceRequirements``) in the trainer job (an ML policy given) or, for
  an MPI runtime that runs its launcher as a node, the ``node`` job. The runtime's other names
  stay; the PodSet's single-pod requests (PodGroup ``minResources``) see the merged ones. The
  document keeps only ``limits`` and ``requests`` (``claims`` are dropped, as upstream's apply
  configuration has no room for them there).
* ``SyncParallelCount``: before any component builder builds, each one syncs the PodSets'
  counts; the JobSet plugin writes them into the parallelism and completions of the job of the
  same name.
* Endpoints of every replica: ``<trainjob>-<job>-<replica>-<pod>.<subdomain>`` for each of the
  job's ``replicas`` (as the runtime has them, before the builder sets the trainer's to one).
* Torch ``envInjection``: the ``PET_*`` env of the trainer, the master address and port included,
  into every target container (regular before init containers of the named PodSet).
* The JobSet's ``volumeClaimPolicies`` as the JobSet stores them (docs/behaviour/trainer.md
  §12.16): encoded as Go's typed ``VolumeClaimPolicy`` writes them (a PVC template's
  ``status: {}``), as upstream's apply document has them, and each policy without a retention
  policy given ``{whenDeleted: Delete}``, JobSet v0.12.0's default. That default is written by
  JobSet's defaulting webhook on create only, into a list that is atomic and immutable (the CRD's
  ``self == oldSelf``): upstream's apply document leaves it out, so every later apply of the
  JobSet (a pass before the cache has seen the JobSet just created, a suspended TrainJob's
  reconciles, its resume) is refused ``spec.volumeClaimPolicies: Invalid value: Value is
  immutable``. With the default in the document those applies change nothing
  (docs/divergences.md T-16).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from manager.meta.gotext import go_quote
from manager.meta.object import Json
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import MLPolicy, Trainer, TrainJob
from trainer.jobset.levels.v0_12_admission import default_retention_policies
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import ContainerInfo, Info
from trainer.runtime.resources import canonical_quantities

__all__ = ["MERGE_IN_RUNTIME_INFO", "MergeInRuntimeInfo", "merge_resource_requirements"]


def _merged_list(base: Any, override: Any) -> Json | None:
    """A strategic merge of two ResourceLists (maps merge by key, the override's value wins);
    an empty result is left out as Go's ``omitempty`` does."""
    merged: Json = dict(base) if isinstance(base, Mapping) else {}
    if isinstance(override, Mapping):
        merged.update(override)
    return canonical_quantities(merged) if merged else None


def merge_resource_requirements(base: Mapping[str, Any], override: Mapping[str, Any]) -> Json:
    """``MergeResourceRequirements`` as the ``node`` container gets it: the limits and requests
    of ``base`` (the runtime's) with those of ``override`` (the TrainJob's) over them, per name."""
    out: Json = {}
    for key in ("limits", "requests"):
        merged = _merged_list(base.get(key), override.get(key))
        if merged is not None:
            out[key] = merged
    return out


def _pod_spec(rjob: Json) -> Json | None:
    template = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
    pod_spec = template.get("spec")
    return pod_spec if isinstance(pod_spec, dict) else None


class MergeInRuntimeInfo:
    """``RuntimeBuild`` of v2.3."""

    def node_resources(self, trainjob: TrainJob, jobset_spec: Json, ml_policy: MLPolicy | None) -> None:
        trainer = trainjob.spec.trainer if trainjob.spec is not None else None
        if trainer is None or trainer.resources_per_node is None:
            return
        mpi = ml_policy.mpi if ml_policy is not None else None
        launcher_as_node = mpi is not None and bool(mpi.run_launcher_as_node)
        for rjob in jobset_spec.get("replicatedJobs") or ():
            labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
            is_trainer = labels.get(tc.LabelTrainJobAncestor) == tc.AncestorTrainer and ml_policy is not None
            if not is_trainer and not (launcher_as_node and rjob.get("name") == tc.Node):
                continue
            pod_spec = _pod_spec(rjob)
            for container in (pod_spec or {}).get("containers") or ():
                if container.get("name") != tc.Node:
                    continue
                container["resources"] = merge_resource_requirements(
                    container.get("resources") or {}, trainer.resources_per_node
                )
                break

    def jobset_node_resources(self, container: Json, trainer: Trainer) -> None:
        """Nothing: ``newRuntimeInfo`` merged them into the document already."""

    def endpoint_replicas(self, rjob: Json) -> int:
        replicas = rjob.get("replicas")
        return 1 if replicas is None else int(replicas)

    def sync_parallel_count(self, builders: Sequence[object], info: Info | None) -> None:
        for builder in builders:
            sync = getattr(builder, "sync_parallel_count", None)
            if callable(sync):
                sync(info)

    def build_counts(self, jobset_spec: Json, info: Info) -> None:
        """The counts are synced already; a document with fewer jobs than PodSets is refused."""
        rjobs = jobset_spec.get("replicatedJobs") or []
        pod_sets = info.template_spec.pod_sets
        if len(rjobs) < len(pod_sets):
            raise RuntimeFailure(
                f"runtime template has {len(rjobs)} replicatedJobs but runtime info has {len(pod_sets)} podSets"
            )

    def torch_env_targets(self, info: Info) -> list[ContainerInfo]:
        policy = info.runtime_policy.ml_policy
        torch = policy.torch if policy is not None else None
        injection = ((torch.model_extra or {}) if torch is not None else {}).get("envInjection")
        targets = injection.get("targets") if isinstance(injection, dict) else None
        found: list[ContainerInfo] = []
        for target in targets or ():
            if not isinstance(target, dict):
                continue
            job = target.get("jobName", "")
            for name in target.get("containerNames") or ():
                container = info.find_container_by_pod_set_name(job, name)
                if container is None:
                    raise RuntimeFailure(
                        f"envInjection target podSet {go_quote(job)} container {go_quote(name)} "
                        "not found in runtime template"
                    )
                found.append(container)
        return found

    def volume_claim_policies(self, jobset_spec: Json) -> None:
        policies = jobset_spec.get("volumeClaimPolicies")
        if not isinstance(policies, list):
            return
        for policy in policies:
            # a value the struct cannot hold is sent as it is, for the API server to refuse
            if isinstance(policy, dict):
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    gocodec.encode_struct(
                        policy, gocodec.VOLUME_CLAIM_POLICY, gocodec.JOBSET_V0_12_TYPES_FILE
                    )
        # the webhook's create-time default, so that a later apply sends what is stored
        default_retention_policies(jobset_spec)


MERGE_IN_RUNTIME_INFO = MergeInRuntimeInfo()
