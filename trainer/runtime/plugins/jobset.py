"""JobSet plugin (docs/behaviour/trainer.md §2.10): pod network, the JobSet apply document, validation,
status.

Why one plugin: the JobSet is the TrainJob's workload; this plugin turns the Info into the
JobSet the reconciler applies, checks the TrainJob against the runtime's job template, and
maps the JobSet's status back onto the TrainJob.
"""

from __future__ import annotations

from typing import Any

from manager.client.errors import NotFound
from manager.meta.conditions import set_status_condition
from manager.meta.field import FieldError
from manager.meta.object import Json, json_copy
from trainer.api import jobset_constants as jc
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.apply import (
    env_vars,
    upsert_env_vars,
    upsert_ports,
    upsert_volume_mounts,
    upsert_volumes,
)
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import ContainerInfo, Endpoints, Info
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import JOBSET_GVK, name_of, namespace_of, owner_reference
from trainer.runtime.plugins.base import PluginContext, Watch
from trainer.runtime.plugins.watches import by_controller_owner
from trainer.runtime.status import is_finished

__all__ = ["JobSet"]

STORAGE_URI = "STORAGE_URI"


def _job_labels(rjob: Json) -> dict[str, str]:
    return ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}


def _pod_template(rjob: Json) -> Json:
    return rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})  # type: ignore[no-any-return]


def _pod_spec(rjob: Json) -> Json:
    return _pod_template(rjob).setdefault("spec", {})  # type: ignore[no-any-return]


def _upsert_into(doc: Json, key: str, items: list[Json], upsert: Any) -> None:
    """Upsert into ``doc[key]`` without creating an empty list when there is nothing to add."""
    if not items and not doc.get(key):
        return
    target = doc.setdefault(key, [])
    upsert(target, items)


def _sync_containers(containers: list[Json], infos: list[ContainerInfo], *, append: bool = False) -> None:
    """Each PodSet container onto the pod's container of the same index; with ``append`` (init
    containers, as in v2.3.0), a PodSet container past the pod's last one is added to it."""
    for index, info in enumerate(infos):
        if index >= len(containers):
            if not append:
                break
            containers.append({"name": info.name})
        container = containers[index]
        if info.command:
            container["command"] = list(info.command)
        if info.image:
            container["image"] = info.image
        _upsert_into(container, "env", info.env, upsert_env_vars)
        _upsert_into(container, "ports", info.ports, upsert_ports)
        _upsert_into(container, "volumeMounts", info.volume_mounts, upsert_volume_mounts)


def sync_pod_sets(spec: Json, info: Info, level: RuntimeLevel = V2_1) -> None:
    """Counts (the level's ``build_counts``: v2.1 here by index, v2.3 synced before the
    builders), volumes, images, commands, env, ports and mounts of every PodSet into the
    JobSetSpec document; init containers a plugin added to a PodSet are added to the pod."""
    level.build.build_counts(spec, info)
    rjobs = spec.get("replicatedJobs") or []
    for index, pod_set in enumerate(info.template_spec.pod_sets):
        if index >= len(rjobs):
            break
        rjob = rjobs[index]
        pod_spec = _pod_spec(rjob)
        _upsert_into(pod_spec, "volumes", pod_set.volumes, upsert_volumes)
        init_containers = pod_spec.get("initContainers")
        if init_containers is None and pod_set.init_containers:
            init_containers = pod_spec["initContainers"] = []
        _sync_containers(
            init_containers if init_containers is not None else [], pod_set.init_containers, append=True
        )
        _sync_containers(pod_spec.get("containers") or [], pod_set.containers)


def apply_initializers(spec: Json, trainjob: TrainJob) -> None:
    """Storage URI, env and secret of the dataset/model initializer containers."""
    initializer = trainjob.spec.initializer if trainjob.spec else None
    for rjob in spec.get("replicatedJobs") or ():
        ancestor = _job_labels(rjob).get(tc.LabelTrainJobAncestor)
        if ancestor == tc.DatasetInitializer:
            source: Any = initializer.dataset if initializer else None
        elif ancestor == tc.ModelInitializer:
            source = initializer.model if initializer else None
        else:
            continue
        rjob["replicas"] = 1
        if source is None:
            continue
        for container in _pod_spec(rjob).get("containers") or ():
            if container.get("name") != ancestor:
                continue
            env: list[Json] = []
            if source.storage_uri is not None:
                env.append({"name": STORAGE_URI, "value": source.storage_uri})
            env += env_vars(source.env) or []
            _upsert_into(container, "env", env, upsert_env_vars)
            if source.secret_ref is not None:
                container.setdefault("envFrom", []).append(
                    {"secretRef": {"name": (source.secret_ref or {}).get("name", "")}}
                )


def apply_trainer(spec: Json, trainjob: TrainJob, info: Info, level: RuntimeLevel = V2_1) -> None:
    """Image, command, args, resources (the level's ``jobset_node_resources``: v2.1 replaced,
    v2.3 merged earlier) and env of the trainer's ``node`` containers."""
    trainer = trainjob.spec.trainer if trainjob.spec else None
    mpi = info.runtime_policy.ml_policy.mpi if info.runtime_policy.ml_policy else None
    launcher_as_node = mpi is not None and mpi.run_launcher_as_node
    for rjob in spec.get("replicatedJobs") or ():
        is_trainer = _job_labels(rjob).get(tc.LabelTrainJobAncestor) == tc.AncestorTrainer
        if is_trainer:
            rjob["replicas"] = 1
        if not is_trainer and not (launcher_as_node and rjob.get("name") == tc.Node):
            continue
        if trainer is None:
            continue
        for container in _pod_spec(rjob).get("containers") or ():
            if container.get("name") != tc.Node:
                continue
            if is_trainer:
                if trainer.image is not None:
                    container["image"] = trainer.image
                for key, values in (("command", trainer.command), ("args", trainer.args)):
                    if values is None:
                        continue
                    # An empty list replaces the template's and, like Go's omitempty, is not written.
                    if values:
                        container[key] = list(values)
                    else:
                        container.pop(key, None)
            level.build.jobset_node_resources(container, trainer)
            _upsert_into(container, "env", env_vars(trainer.env) or [], upsert_env_vars)


def apply_pod_metadata(spec: Json, info: Info) -> None:
    """The scheduler's pod labels and annotations on every pod template."""
    for rjob in spec.get("replicatedJobs") or ():
        meta = _pod_template(rjob).setdefault("metadata", {})
        if info.scheduler.pod_labels:
            meta.setdefault("labels", {}).update(info.scheduler.pod_labels)
        if info.scheduler.pod_annotations:
            meta.setdefault("annotations", {}).update(info.scheduler.pod_annotations)


_KEYED_LISTS = ("replicatedJobs", "containers", "initContainers")
"""Lists whose items ``drop_emptied_structs`` matches by name; a volume's ``emptyDir: {}`` means
something, so ``volumes`` (and every other list) is left as it is."""


def drop_emptied_structs(document: Json, existing: Any) -> None:
    """Leave out of the apply document every empty struct (``{}``) that is not empty in the
    live JobSet.

    Server-side apply turns such a struct into ``null`` once the fields this manager owned in it
    are gone (an override's pod labels removed while suspended: the template's ``metadata: {}``
    becomes ``null``) and the API server then refuses the JobSet on every attempt, so it never
    resumes. Left out, the struct's owned fields are removed and the struct with them; the next
    apply writes ``{}`` again. Upstream stays stuck (docs/divergences.md)."""
    if not isinstance(existing, dict):
        return
    for key in list(document):
        value, live = document[key], existing.get(key)
        if isinstance(value, dict):
            if not value and isinstance(live, dict) and live:
                del document[key]
            else:
                drop_emptied_structs(value, live)
        elif key in _KEYED_LISTS and isinstance(value, list) and isinstance(live, list):
            by_name = {item.get("name"): item for item in live if isinstance(item, dict)}
            for item in value:
                if isinstance(item, dict):
                    drop_emptied_structs(item, by_name.get(item.get("name")))


class JobSet:
    name = "JobSet"

    def __init__(self, context: PluginContext) -> None:
        self._reader = context.reader
        self._level = context.level

    def identify_pod_network(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Endpoints ``<tj>-<rjob>-<r>-<k>.<subdomain>`` of every PodSet, for the replicas
        the level counts (v2.1: replica 0; v2.3: each of the job's ``replicas``)."""
        if info is None or trainjob is None or not isinstance(info.template_spec.obj_apply, dict):
            return
        spec = info.template_spec.obj_apply
        subdomain = (spec.get("network") or {}).get("subdomain") or name_of(trainjob)
        rjobs = spec.get("replicatedJobs") or []
        for index, pod_set in enumerate(info.template_spec.pod_sets):
            if index >= len(rjobs):
                break
            pod_set.endpoints = Endpoints(
                name_of(trainjob),
                rjobs[index].get("name", ""),
                subdomain,
                pod_set.count_or_one(),
                self._level.build.endpoint_replicas(rjobs[index]),
            )

    def sync_parallel_count(self, info: Info | None) -> None:
        """v2.3.0's ``SyncParallelCount`` (the level runs it before any builder builds): each
        PodSet's count into the parallelism and completions of the job of its name."""
        if info is None or not isinstance(info.template_spec.obj_apply, dict):
            return
        rjobs = info.template_spec.obj_apply.get("replicatedJobs") or []
        for pod_set in info.template_spec.pod_sets:
            if pod_set.count is None:
                continue
            for rjob in rjobs:
                if rjob.get("name") is not None and rjob.get("name") == pod_set.name:
                    job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
                    job_spec["parallelism"] = pod_set.count
                    job_spec["completions"] = pod_set.count
                    break

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """The JobSet apply document; nothing once a JobSet runs (neither side suspended)."""
        if info is None or trainjob is None or trainjob.spec is None:
            raise RuntimeFailure("runtime info or object is missing")
        try:
            existing = await self._reader.get(JOBSET_GVK, name_of(trainjob), namespace_of(trainjob))
        except NotFound:
            existing = None
        if (
            existing is not None
            and not trainjob.spec.suspend
            and not (existing.get("spec") or {}).get("suspend")
        ):
            return []
        spec = json_copy(info.template_spec.obj_apply or {})
        sync_pod_sets(spec, info, self._level)
        apply_initializers(spec, trainjob)
        apply_trainer(spec, trainjob, info, self._level)
        apply_pod_metadata(spec, info)
        self._level.build.volume_claim_policies(spec)
        if "suspend" in trainjob.spec.model_fields_set:
            spec["suspend"] = trainjob.spec.suspend
        if existing is not None:
            drop_emptied_structs(spec, existing.get("spec"))
        metadata: Json = {"name": name_of(trainjob), "namespace": namespace_of(trainjob)}
        if info.labels:
            metadata["labels"] = dict(info.labels)
        if info.annotations:
            metadata["annotations"] = dict(info.annotations)
        metadata["ownerReferences"] = [owner_reference(trainjob)]
        return [{"apiVersion": jc.API_VERSION, "kind": jc.KIND, "metadata": metadata, "spec": spec}]

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """Initializer jobs exist, then the level's rules of the TrainJob's customisation (v2.1
        ``podTemplateOverrides``, v2.3 ``runtimePatches``: the jobs and containers they name,
        when they may change)."""
        if info is None or not isinstance(info.template_spec.obj_apply, dict) or new.spec is None:
            return [], []
        rjobs = info.template_spec.obj_apply.get("replicatedJobs") or []
        containers_by_job: dict[str, set[str]] = {}
        for rjob in rjobs:
            pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
            names = {
                c.get("name", "") for c in (pod.get("initContainers") or []) + (pod.get("containers") or [])
            }
            containers_by_job.setdefault(rjob.get("name", ""), set()).update(names)
        errors = self._validate_initializers(new, containers_by_job, rjobs)
        errors += await self._level.validate_customisation(self._reader, old, new, containers_by_job)
        return [], errors

    def _validate_initializers(
        self, new: TrainJob, containers_by_job: dict[str, set[str]], rjobs: list[Json]
    ) -> list[FieldError]:
        errors: list[FieldError] = []
        initializer = new.spec.initializer if new.spec else None
        ref = new.spec.runtime_ref if new.spec else None
        volume = self._level.initializer_volume
        for configured, job, config in (
            (
                initializer is not None and initializer.dataset is not None,
                tc.DatasetInitializer,
                "datasetConfig",
            ),
            (initializer is not None and initializer.model is not None, tc.ModelInitializer, "modelConfig"),
        ):
            if not configured:
                continue
            if job not in containers_by_job:
                errors.append(
                    FieldError.invalid(
                        "spec.runtimeRef",
                        ref,
                        f"must have {job} job when trainJob is configured with input {config}",
                    )
                )
            elif job not in containers_by_job[job]:
                errors.append(
                    FieldError.invalid(
                        "spec.runtimeRef", ref, f"must have container with name - {job} in the {job} job"
                    )
                )
            elif volume is not None and not _mounts(rjobs, job, volume):
                errors.append(
                    FieldError.invalid(
                        "spec.runtimeRef",
                        ref,
                        f"must have volumeMount with name - {volume} in container {job} of the {job} job",
                    )
                )
        return errors

    async def status(self, trainjob: TrainJob) -> Json | None:
        """The TrainJob status from its JobSet: terminal conditions and per-job counters.

        A finished TrainJob whose JobSet is gone (deleted by hand or by its TTL) keeps the
        status it has: ``None`` tells the reconciler so, instead of a NotFound error.
        """
        status = trainjob.status.to_dict() if trainjob.status is not None else {}
        try:
            jobset = await self._reader.get(JOBSET_GVK, name_of(trainjob), namespace_of(trainjob))
        except NotFound:
            if is_finished(status):
                return None
            raise
        jobset_status = jobset.get("status") or {}
        conditions = jobset_status.get("conditions") or []
        # Completed is looked at before Failed, whatever their order on the JobSet.
        for jobset_type, trainjob_type in (
            (jc.JobSetCompleted, tc.TrainJobComplete),
            (jc.JobSetFailed, tc.TrainJobFailed),
        ):
            found = next((c for c in conditions if c.get("type") == jobset_type), None)
            if found is not None and found.get("status") == "True":
                set_status_condition(status, trainjob_type, found)
        jobs = [
            {key: (item.get(key) if key == "name" else item.get(key) or 0) for key in _JOB_STATUS_KEYS}
            for item in jobset_status.get("replicatedJobsStatus") or ()
        ]
        if jobs:
            status["jobsStatus"] = jobs
        else:
            status.pop("jobsStatus", None)
        return status

    def watches(self) -> list[Watch]:
        """JobSets controlled by a TrainJob requeue it (registered even without the CRD)."""
        return [
            Watch(
                JOBSET_GVK,
                by_controller_owner,
                requires_crd=JOBSET_GVK,
                missing_crd_message="JobSet CRDs must be installed in advance",
                register_anyway=True,
            )
        ]


_JOB_STATUS_KEYS = ("name", "ready", "succeeded", "failed", "active", "suspended")


def _mounts(rjobs: list[Json], job: str, volume: str) -> bool:
    """Whether a container named ``job`` of a replicated job named ``job`` mounts ``volume``."""
    for rjob in rjobs:
        if rjob.get("name") != job:
            continue
        pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        for container in pod.get("containers") or ():
            if container.get("name") == job and any(
                mount.get("name") == volume for mount in container.get("volumeMounts") or ()
            ):
                return True
    return False
