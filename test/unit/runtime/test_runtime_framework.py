"""The plugin framework: extension points, phases, watches and status (docs/behaviour/trainer.md §10 E)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import (
    RES4,
    FakeReader,
    RecordingIndexer,
    load,
    redact_ssh_secret,
    rjob,
    sort_objects,
    tj_model,
    training_runtime,
    trainjob,
    wrapper_rjobs,
)

from trainer.api.trainer_v1alpha1 import MLPolicy, PodGroupPolicy, TrainingRuntime, TrainJob, TrainJobStatus
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.framework import Framework, IndexNames
from trainer.runtime.info import Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.plugins import new_registry
from trainer.runtime.plugins.coscheduling import CoScheduling
from trainer.runtime.plugins.jobset import JobSet
from trainer.runtime.registry import TRAINING_RUNTIME_KEY, new_runtimes
from trainer.runtime.runtime_info import new_runtime_info

Json = dict[str, Any]


async def full_framework(reader: FakeReader) -> Framework:
    return await Framework.new(reader, new_registry(), RecordingIndexer())


async def empty_framework() -> Framework:
    return await Framework.new(FakeReader(), {}, RecordingIndexer())


def names(plugins: list[Any]) -> list[str]:
    return [p.name for p in plugins]


async def test_e1_extension_points_of_the_full_registry() -> None:
    # spec: trainer E1
    framework = await full_framework(FakeReader())
    assert names(framework.enforce_ml_policy_plugins) == ["MPI", "PlainML", "Torch"]
    assert names(framework.enforce_pod_group_policy_plugins) == ["CoScheduling", "Volcano"]
    assert names(framework.custom_validation_plugins) == ["Volcano", "MPI", "Torch", "JobSet"]
    assert names(framework.watch_extension_plugins) == ["CoScheduling", "Volcano", "MPI", "JobSet"]
    assert names(framework.pod_network_plugins) == ["JobSet"]
    assert names(framework.component_builder_plugins) == ["CoScheduling", "Volcano", "MPI", "JobSet"]
    assert framework.trainjob_status_plugin is not None and framework.trainjob_status_plugin.name == "JobSet"


async def test_e2_training_runtime_runtime_class_index_failure() -> None:
    # spec: trainer E2
    with pytest.raises(RuntimeFailure, match=r"^setting index on runtimeClass for TrainingRuntime: "):
        await Framework.new(
            FakeReader(), {"CoScheduling": CoScheduling}, RecordingIndexer(), IndexNames(training_runtime="")
        )


async def test_e3_cluster_training_runtime_runtime_class_index_failure() -> None:
    # spec: trainer E3
    with pytest.raises(RuntimeFailure, match=r"^setting index on runtimeClass for ClusterTrainingRuntime: "):
        await Framework.new(
            FakeReader(),
            {"CoScheduling": CoScheduling},
            RecordingIndexer(),
            IndexNames(cluster_training_runtime=""),
        )


def three_pod_sets(node_count: int) -> list[PodSet]:
    return [
        PodSet(name="dataset-initializer", ancestor="dataset-initializer", count=1),
        PodSet(name="model-initializer", ancestor="model-initializer", count=1),
        PodSet(name="node", ancestor="trainer", count=node_count),
    ]


def counts(info: Info) -> list[int | None]:
    return [ps.count for ps in info.template_spec.pod_sets]


async def test_e4_plain_ml_without_trainer_changes_nothing() -> None:
    # spec: trainer E4
    info = Info(
        runtime_policy=RuntimePolicy(ml_policy=MLPolicy()),
        template_spec=TemplateSpec(pod_sets=three_pod_sets(10)),
    )
    (await full_framework(FakeReader())).run_enforce_ml_policy_plugins(info, tj_model())
    assert counts(info) == [1, 1, 10]


async def test_e5_plain_ml_num_nodes_sets_trainer_count() -> None:
    # spec: trainer E5
    info = Info(
        runtime_policy=RuntimePolicy(ml_policy=MLPolicy()),
        template_spec=TemplateSpec(pod_sets=three_pod_sets(10)),
    )
    (await full_framework(FakeReader())).run_enforce_ml_policy_plugins(
        info, tj_model(trainer={"numNodes": 30})
    )
    assert counts(info) == [1, 1, 30]


async def test_e6_empty_registry_leaves_info_unchanged() -> None:
    # spec: trainer E6
    info = Info(
        runtime_policy=RuntimePolicy(ml_policy=MLPolicy()),
        template_spec=TemplateSpec(pod_sets=three_pod_sets(10)),
    )
    (await empty_framework()).run_enforce_ml_policy_plugins(info, tj_model(trainer={"numNodes": 30}))
    assert info == Info(
        runtime_policy=RuntimePolicy(ml_policy=MLPolicy()),
        template_spec=TemplateSpec(pod_sets=three_pod_sets(10)),
    )


async def test_e7_coscheduling_pod_label() -> None:
    # spec: trainer E7
    policy = PodGroupPolicy.from_dict({"coscheduling": {"scheduleTimeoutSeconds": 99}})
    info = Info(runtime_policy=RuntimePolicy(pod_group_policy=policy))
    (await full_framework(FakeReader())).run_enforce_pod_group_policy_plugins(info, tj_model())
    assert info.scheduler.pod_labels == {"scheduling.x-k8s.io/pod-group": "test-job"}
    assert info.scheduler.pod_annotations is None


async def test_e8_volcano_pod_annotation() -> None:
    # spec: trainer E8
    info = Info(runtime_policy=RuntimePolicy(pod_group_policy=PodGroupPolicy.from_dict({"volcano": {}})))
    (await full_framework(FakeReader())).run_enforce_pod_group_policy_plugins(
        info, tj_model(name="test-volcano-job")
    )
    assert info.scheduler.pod_annotations == {"scheduling.k8s.io/group-name": "test-volcano-job"}
    assert info.scheduler.pod_labels == {}


async def test_e9_empty_registry_sets_no_scheduler_metadata() -> None:
    # spec: trainer E9
    info = Info(runtime_policy=RuntimePolicy(pod_group_policy=PodGroupPolicy.from_dict({"coscheduling": {}})))
    (await empty_framework()).run_enforce_pod_group_policy_plugins(info, tj_model())
    assert info.scheduler.pod_labels == {} and info.scheduler.pod_annotations is None


def wrapper_info(tj: TrainJob) -> Info:
    spec = TrainingRuntime.from_dict(training_runtime()).spec
    assert spec is not None
    return new_runtime_info(tj, spec.template, spec.ml_policy, spec.pod_group_policy)


async def test_e10_full_registry_validates_plain_trainjobs() -> None:
    # spec: trainer E10
    old, new = tj_model(), tj_model()
    assert await (await full_framework(FakeReader())).run_custom_validation_plugins(
        wrapper_info(new), old, new
    ) == (
        [],
        [],
    )


async def test_e11_empty_registry_validates_nothing() -> None:
    # spec: trainer E11
    new = tj_model(initializer={"dataset": {}})
    assert await (await empty_framework()).run_custom_validation_plugins(wrapper_info(new), None, new) == (
        [],
        [],
    )


MPI_LAUNCHER_AS_NODE = {
    "numNodes": 1,
    "mpi": {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": True,
    },
}


def inputs_e12():
    launcher = rjob("launcher", "trainer", [{"name": "node", "image": "test:runtime"}])
    node = rjob(
        "node",
        "invalid",
        [{"name": "node", "image": "test:openssh", "command": ["openssh"], "args": ["openssh"]}],
        parallelism=2,
    )
    rjobs = [*wrapper_rjobs(extra={"image": "test:runtime"})[:2], launcher, node]
    runtime = training_runtime(rjobs=rjobs, ml_policy=MPI_LAUNCHER_AS_NODE)
    tj = trainjob(
        trainer={
            "numNodes": 100,
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": {"requests": {"cpu": "1", "memory": "4Gi"}},
        }
    )
    return runtime, tj


async def run_e12(runtime, tj):
    """Upstream's flow: pod-group, ML policy, then builders, with endpoints given by the test."""
    model = TrainJob.from_dict(tj)
    spec = TrainingRuntime.from_dict(runtime).spec
    info = new_runtime_info(model, spec.template, spec.ml_policy, spec.pod_group_policy)
    info.find_pod_set_by_name("launcher").endpoints = ["test-job-launcher-0-0.test-job"]
    info.find_pod_set_by_name("node").endpoints = ["test-job-node-0-0.test-job", "test-job-node-0-1.test-job"]
    framework = await full_framework(FakeReader())
    framework.run_enforce_pod_group_policy_plugins(info, model)
    framework.run_enforce_ml_policy_plugins(info, model)
    assert info.find_pod_set_by_name("node").count == 99
    return redact_ssh_secret(sort_objects(await framework.run_component_builder_plugins(info, model)))


def inputs_e13():
    runtime = training_runtime(
        rjobs=wrapper_rjobs(extra={"image": "test:runtime", "resources": RES4}),
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 300}},
    )
    tj = trainjob(trainer={"numNodes": 100, "image": "test:trainjob"})
    return runtime, tj


def inputs_e14():
    rjobs = wrapper_rjobs(extra={"image": "test:runtime", "resources": RES4})
    for item in rjobs:
        item["template"]["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    runtime = training_runtime(
        rjobs=rjobs,
        template_meta={"annotations": {"scheduling.volcano.sh/queue-name": "q1"}},
        pod_group_policy={"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}},
    )
    tj = trainjob(name="test-volcano-job", trainer={"numNodes": 100})
    return runtime, tj


async def test_e12_mpi_launcher_as_node_objects() -> None:
    # spec: trainer E12
    assert await run_e12(*inputs_e12()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: test-job
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          spec:
            replicatedJobs:
            - name: dataset-initializer
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: dataset-initializer
                        image: test:runtime
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: model-initializer
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: model-initializer
                        image: test:runtime
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: launcher
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: test:trainjob
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        env:
                        - {name: OMPI_MCA_orte_default_hostfile, value: /etc/mpi/hostfile}
                        - {name: OMPI_MCA_orte_keep_fqdn_hostnames, value: 'true'}
                        - {name: OMPI_MCA_orte_set_default_slots, value: '1'}
                        - {name: OMPI_MCA_plm_rsh_args, value: -o ConnectionAttempts=10}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /root/.ssh}
                        - {name: mpi-hostfile, mountPath: /etc/mpi}
                        command: [trainjob]
                        args: [trainjob]
                      volumes:
                      - name: mpi-ssh-auth
                        secret:
                          secretName: test-job-mpi-ssh-auth
                          items:
                          - {key: ssh-privatekey, path: id_rsa}
                          - {key: ssh-publickey, path: id_rsa.pub}
                          - {key: ssh-publickey, path: authorized_keys}
                      - name: mpi-hostfile
                        configMap:
                          name: test-job-mpi-hostfile
                          items:
                          - {key: hostfile, path: hostfile, mode: 292}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: node
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: invalid}
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: test:openssh
                        command: [openssh]
                        args: [openssh]
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /root/.ssh}
                      volumes:
                      - name: mpi-ssh-auth
                        secret:
                          secretName: test-job-mpi-ssh-auth
                          items:
                          - {key: ssh-privatekey, path: id_rsa}
                          - {key: ssh-publickey, path: id_rsa.pub}
                          - {key: ssh-publickey, path: authorized_keys}
                    metadata: {}
                  parallelism: 99
                  completions: 99
              replicas: 1
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: test-job-mpi-hostfile
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          data:
            hostfile: |
              test-job-launcher-0-0.test-job slots=1
              test-job-node-0-0.test-job slots=1
              test-job-node-0-1.test-job slots=1
        - apiVersion: v1
          kind: Secret
          metadata:
            name: test-job-mpi-ssh-auth
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          type: kubernetes.io/ssh-auth
          immutable: true
          data: {ssh-privatekey: <private key>, ssh-publickey: <public key>}
    """
    )


async def runtime_objects(runtime: Json, tj: Json) -> list[Json]:
    runtimes = await new_runtimes(FakeReader([runtime]), RecordingIndexer())
    return sort_objects(await runtimes[TRAINING_RUNTIME_KEY].new_objects(tj))


async def test_e13_coscheduling_podgroup_and_jobset() -> None:
    # spec: trainer E13
    assert await runtime_objects(*inputs_e13()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: test-job
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          spec:
            replicatedJobs:
            - name: dataset-initializer
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: dataset-initializer
                        image: test:runtime
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata:
                      labels: {scheduling.x-k8s.io/pod-group: test-job}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: model-initializer
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: model-initializer
                        image: test:runtime
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/model}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata:
                      labels: {scheduling.x-k8s.io/pod-group: test-job}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: node
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: test:trainjob
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata:
                      labels: {scheduling.x-k8s.io/pod-group: test-job}
                  parallelism: 100
                  completions: 100
              replicas: 1
        - apiVersion: scheduling.x-k8s.io/v1alpha1
          kind: PodGroup
          metadata:
            name: test-job
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          spec:
            minMember: 102
            minResources: {cpu: '102', memory: 408Gi}
            scheduleTimeoutSeconds: 300
    """
    )


async def test_e14_volcano_podgroup_and_jobset() -> None:
    # spec: trainer E14
    assert await runtime_objects(*inputs_e14()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: test-volcano-job
            namespace: default
            annotations: {scheduling.volcano.sh/queue-name: q1}
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-volcano-job, uid: uid, controller: true,
              blockOwnerDeletion: true}
          spec:
            replicatedJobs:
            - name: dataset-initializer
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: dataset-initializer
                        image: test:runtime
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      priorityClassName: system-node-critical
                    metadata:
                      annotations: {scheduling.k8s.io/group-name: test-volcano-job}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: model-initializer
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: model-initializer
                        image: test:runtime
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/model}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      priorityClassName: system-node-critical
                    metadata:
                      annotations: {scheduling.k8s.io/group-name: test-volcano-job}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: node
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: test:runtime
                        resources:
                          requests: {cpu: '1', memory: 4Gi}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      priorityClassName: system-node-critical
                    metadata:
                      annotations: {scheduling.k8s.io/group-name: test-volcano-job}
                  parallelism: 100
                  completions: 100
              replicas: 1
        - apiVersion: scheduling.volcano.sh/v1beta1
          kind: PodGroup
          metadata:
            name: test-volcano-job
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-volcano-job, uid: uid, controller: true,
              blockOwnerDeletion: true}
          spec:
            minMember: 102
            minResources: {cpu: '102', memory: 408Gi}
            queue: q1
            priorityClassName: system-node-critical
            networkTopology: {mode: soft, highestTierAllowed: 2}
    """
    )


async def test_e15_empty_registry_builds_nothing() -> None:
    # spec: trainer E15
    assert await (await empty_framework()).run_component_builder_plugins(None, tj_model()) == []


async def test_e16_watch_extensions() -> None:
    # spec: trainer E16
    framework = await full_framework(FakeReader())
    assert names(framework.watch_extension_plugins) == ["CoScheduling", "Volcano", "MPI", "JobSet"]
    assert [(w.kind.group, w.kind.kind) for w in framework.watches()] == [
        ("scheduling.x-k8s.io", "PodGroup"),
        ("", "LimitRange"),
        ("node.k8s.io", "RuntimeClass"),
        ("scheduling.volcano.sh", "PodGroup"),
        ("", "LimitRange"),
        ("node.k8s.io", "RuntimeClass"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("jobset.x-k8s.io", "JobSet"),
    ]
    assert (await empty_framework()).watches() == []
    assert (await empty_framework()).watch_extension_plugins == []


def jobset_with_status(status: Json) -> Json:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "testing", "namespace": "default"},
        "status": status,
    }


async def trainjob_status(status: Json) -> Json | None:
    framework = await full_framework(FakeReader([jobset_with_status(status)]))
    return await framework.run_trainjob_status_plugin(tj_model(name="testing"))


T = "2025-01-02T03:04:05Z"


async def test_e17_suspended_jobset_gives_empty_status() -> None:
    # spec: trainer E17
    status = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "False",
                "reason": "SuspendedJobs",
                "message": "m",
                "lastTransitionTime": T,
            }
        ]
    }
    assert await trainjob_status(status) == {}


async def test_e18_completed_jobset_completes_trainjob() -> None:
    # spec: trainer E18
    status = {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": T,
            }
        ]
    }
    assert await trainjob_status(status) == {
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": T,
            }
        ]
    }


async def test_e19_failed_jobset_fails_trainjob() -> None:
    # spec: trainer E19
    status = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "lastTransitionTime": T,
            }
        ]
    }
    assert await trainjob_status(status) == {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "lastTransitionTime": T,
            }
        ]
    }


async def test_e20_two_status_plugins_are_rejected() -> None:
    # spec: trainer E20
    class OtherStatus:
        name = "OtherStatus"

        def __init__(self, _context: Any) -> None:
            pass

        async def status(self, trainjob: TrainJob) -> Json:
            return {}

    with pytest.raises(RuntimeFailure, match=r"^too many TrainJobStatus plugins are registered$"):
        await Framework.new(FakeReader(), {"JobSet": JobSet, "OtherStatus": OtherStatus}, RecordingIndexer())


async def test_e21_no_replicated_jobs_status_gives_empty_status() -> None:
    # spec: trainer E21
    assert await trainjob_status({}) == {}


async def test_e22_jobs_status_mirrors_replicated_jobs_status() -> None:
    # spec: trainer E22
    status = {
        "replicatedJobsStatus": [
            {"name": "dataset-initializer", "ready": 1, "succeeded": 1},
            {"name": "model-initializer", "ready": 1, "succeeded": 1},
            {"name": "node", "ready": 2, "active": 2},
        ]
    }
    assert await trainjob_status(status) == {
        "jobsStatus": [
            {
                "name": "dataset-initializer",
                "ready": 1,
                "succeeded": 1,
                "failed": 0,
                "active": 0,
                "suspended": 0,
            },
            {
                "name": "model-initializer",
                "ready": 1,
                "succeeded": 1,
                "failed": 0,
                "active": 0,
                "suspended": 0,
            },
            {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0},
        ]
    }


async def test_e23_failed_job_counter() -> None:
    # spec: trainer E23
    status = {"replicatedJobsStatus": [{"name": "node", "failed": 1}]}
    assert await trainjob_status(status) == {
        "jobsStatus": [{"name": "node", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0}]
    }


def network_info() -> Info:
    spec = {"replicatedJobs": [rjob("node", "trainer", [{"name": "node"}])]}
    return Info(template_spec=TemplateSpec(obj_apply=spec, pod_sets=[PodSet(name="node", count=2)]))


async def test_e24_pod_network_endpoints() -> None:
    # spec: trainer E24
    info = network_info()
    (await full_framework(FakeReader())).run_pod_network_plugins(info, tj_model())
    assert list(info.template_spec.pod_sets[0].endpoints or ()) == [
        "test-job-node-0-0.test-job",
        "test-job-node-0-1.test-job",
    ]


async def test_e25_empty_registry_sets_no_endpoints() -> None:
    # spec: trainer E25
    info = network_info()
    (await empty_framework()).run_pod_network_plugins(info, tj_model())
    assert info.template_spec.pod_sets[0].endpoints is None


async def test_trainjob_status_without_jobset_is_an_error() -> None:
    framework = await full_framework(FakeReader())
    with pytest.raises(RuntimeFailure, match=r'JobSet\.jobset\.x-k8s\.io "testing" not found'):
        await framework.run_trainjob_status_plugin(tj_model(name="testing"))


def test_unused_fixture_helpers_are_exercised() -> None:
    assert RES4 == {"requests": {"cpu": "1", "memory": "4Gi"}}
    assert (
        load("[1]") == [1]
        and redact_ssh_secret([]) == []
        and wrapper_rjobs()[0]["name"] == "dataset-initializer"
    )
    assert trainjob()["metadata"]["name"] == "test-job"


async def test_complete_is_set_before_failed_whatever_the_jobset_order() -> None:
    status = {
        "conditions": [
            {"type": "Failed", "status": "True", "reason": "F", "message": "f", "lastTransitionTime": T},
            {"type": "Completed", "status": "True", "reason": "C", "message": "c", "lastTransitionTime": T},
        ]
    }
    result = await trainjob_status(status)
    assert result is not None
    assert [c["type"] for c in result["conditions"]] == ["Complete", "Failed"]


async def test_status_keeps_existing_conditions_and_moves_transition_time_on_flip() -> None:
    jobset = jobset_with_status(
        {
            "conditions": [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "C",
                    "message": "c",
                    "lastTransitionTime": T,
                }
            ]
        }
    )
    tj = tj_model(name="testing")
    tj.status = TrainJobStatus.from_dict(
        {
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "False",
                    "reason": "Resumed",
                    "message": "r",
                    "lastTransitionTime": T,
                },
                {
                    "type": "Complete",
                    "status": "False",
                    "reason": "Old",
                    "message": "o",
                    "lastTransitionTime": "2020-01-01T00:00:00Z",
                },
            ]
        }
    )
    result = await (await full_framework(FakeReader([jobset]))).run_trainjob_status_plugin(tj)
    assert result == {
        "conditions": [
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Resumed",
                "message": "r",
                "lastTransitionTime": T,
            },
            {"type": "Complete", "status": "True", "reason": "C", "message": "c", "lastTransitionTime": T},
        ]
    }
