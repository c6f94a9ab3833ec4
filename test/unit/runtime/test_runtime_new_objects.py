"""Runtime ``NewObjects`` for TrainingRuntime and ClusterTrainingRuntime (docs/behaviour/trainer.md §10 D).

Inputs mirror the upstream table tests; every expected object is written out below and
compared after sorting by apiVersion, kind and name. The generated SSH key pair is checked for
shape and then replaced by a marker (it is random).
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import (
    INITIALIZER_VOLUME,
    RES,
    FakeReader,
    RecordingIndexer,
    load,
    redact_ssh_secret,
    rjob,
    sort_objects,
    training_runtime,
    trainjob,
    wrapper_containers,
    wrapper_rjobs,
)

from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]


async def new_objects(runtime: Json | None, tj: Json) -> list[Json]:
    runtimes = await new_runtimes(FakeReader([runtime] if runtime else []), RecordingIndexer())
    kind = tj["spec"]["runtimeRef"]["kind"]
    key = CLUSTER_TRAINING_RUNTIME_KEY if kind == "ClusterTrainingRuntime" else TRAINING_RUNTIME_KEY
    return redact_ssh_secret(sort_objects(await runtimes[key].new_objects(tj)))


def _res_containers():
    return {"image": "test:runtime", "command": ["runtime"], "args": ["runtime"], "resources": RES}


def inputs_d1():
    tr = training_runtime(
        meta={"labels": {"conflictLabel": "overridden"}, "annotations": {"conflictAnnotation": "overridden"}},
        rjobs=wrapper_rjobs(extra=_res_containers()),
        ml_policy={"numNodes": 100},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 120}},
    )
    tj = trainjob(
        suspend=True,
        labels={"conflictLabel": "override"},
        annotations={"conflictAnnotation": "override"},
        trainer={"numNodes": 30},
    )
    return tr, tj


def inputs_d2():
    rjobs = wrapper_rjobs(extra=_res_containers())
    rjobs[2]["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "TRAIN_JOB", "value": "original"},
        {"name": "RUNTIME", "value": "test:runtime"},
    ]
    tr = training_runtime(rjobs=rjobs, ml_policy={"numNodes": 100})
    tj = trainjob(
        trainer={
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": RES,
            "env": [
                {"name": "TRAIN_JOB", "value": "override"},
                {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
            ],
        }
    )
    return tr, tj


def inputs_d3():
    c = wrapper_containers({"image": "test:runtime"})
    init_ds = {
        "name": "override-init-container",
        "env": [{"name": "INIT_ENV", "value": "original_init"}, {"name": "DATASET_PATH", "value": "runtime"}],
    }
    init_node = {"name": "override-init-container", "env": [{"name": "INIT_ENV", "value": "original_init"}]}
    node = dict(c["node"], env=[{"name": "TRAIN_JOB", "value": "original"}])
    extra = {
        "name": "override-container",
        "image": "test:runtime",
        "env": [{"name": "CONTAINER_ENV", "value": "original_container"}],
    }
    rjobs = [
        rjob(
            "dataset-initializer",
            "dataset-initializer",
            [c["dataset-initializer"]],
            init_containers=[init_ds],
            volumes=[dict(INITIALIZER_VOLUME)],
        ),
        rjob(
            "model-initializer",
            "model-initializer",
            [c["model-initializer"]],
            volumes=[dict(INITIALIZER_VOLUME)],
        ),
        rjob(
            "node", "trainer", [node, extra], init_containers=[init_node], volumes=[dict(INITIALIZER_VOLUME)]
        ),
    ]
    tr = training_runtime(rjobs=rjobs, ml_policy={"numNodes": 100})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["antarctica-east1", "antarctica-west1"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    tolerations = [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    common = {
        "affinity": affinity,
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
        "tolerations": tolerations,
    }
    overrides = [
        {
            "targetJobs": [{"name": "dataset-initializer"}],
            "spec": {
                "initContainers": [
                    {
                        "name": "override-init-container",
                        "env": [
                            {"name": "INIT_ENV", "value": "override_init"},
                            {"name": "NEW_VALUE", "value": "from_overrides"},
                        ],
                    }
                ],
                "containers": [
                    {
                        "name": "dataset-initializer",
                        "volumeMounts": [
                            {"name": "initializer_secret", "mountPath": "initializer_secret_mount_path"},
                            {"name": "initializer_claim", "mountPath": "initializer_claim_mount_path"},
                        ],
                    }
                ],
                **common,
                "volumes": [
                    {"name": "initializer_secret", "secret": {"secretName": "initializer_secret_name"}},
                    {
                        "name": "initializer_claim",
                        "persistentVolumeClaim": {"claimName": "initializer_claim_name"},
                    },
                ],
            },
        },
        {
            "targetJobs": [{"name": "node"}],
            "spec": {
                "serviceAccountName": "override-sa",
                "initContainers": [
                    {
                        "name": "override-init-container",
                        "env": [{"name": "INIT_ENV", "value": "override_init"}],
                    }
                ],
                "containers": [
                    {
                        "name": "node",
                        "volumeMounts": [
                            {"name": "node_secret", "mountPath": "node_secret_mount_path"},
                            {"name": "node_claim", "mountPath": "node_claim_mount_path"},
                        ],
                    },
                    {
                        "name": "override-container",
                        "env": [{"name": "CONTAINER_ENV", "value": "override_container"}],
                    },
                ],
                **common,
                "imagePullSecrets": [{"name": "registry-credential"}],
                "volumes": [
                    {"name": "node_secret", "secret": {"secretName": "node_secret_name"}},
                    {"name": "node_claim", "persistentVolumeClaim": {"claimName": "node_claim_name"}},
                ],
            },
        },
    ]
    tj = trainjob(trainer={"image": "test:trainjob"}, podTemplateOverrides=overrides)
    return tr, tj


def inputs_d4():
    tr = training_runtime(rjobs=wrapper_rjobs(extra={"image": "test:runtime"}), ml_policy={"numNodes": 1})
    tj = trainjob(
        podTemplateOverrides=[
            {"targetJobs": [{"name": "dataset-initializer"}], "spec": {"affinity": None}},
            {"targetJobs": [{"name": "node"}], "spec": {"affinity": None}},
        ]
    )
    return tr, tj


def inputs_d4_baseline():
    tr, tj = inputs_d4()
    del tj["spec"]["podTemplateOverrides"]
    return tr, tj


def inputs_d5():
    tr = training_runtime(rjobs=wrapper_rjobs(extra={"image": "test:runtime"}), ml_policy={"numNodes": 1})
    tj = trainjob(
        podTemplateOverrides=[
            {
                "targetJobs": [{"name": "dataset-initializer"}],
                "metadata": {"labels": {"k1": "v1"}, "annotations": {"a1": "v1"}},
            },
            {
                "targetJobs": [{"name": "node"}],
                "metadata": {"labels": {"k2": "v2"}, "annotations": {"a2": "v2"}},
            },
        ]
    )
    return tr, tj


def inputs_d6():
    tr = training_runtime(rjobs=wrapper_rjobs(extra={"image": "test:runtime"}))
    tj = trainjob(
        podTemplateOverrides=[
            {
                "targetJobs": [{"name": "node"}],
                "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
            },
            {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "test-sa"}},
        ]
    )
    return tr, tj


def inputs_d7():
    tr = training_runtime(rjobs=wrapper_rjobs(extra={"image": "test:runtime"}))
    tj = trainjob(
        podTemplateOverrides=[
            {
                "targetJobs": [{"name": "node"}],
                "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
            },
            {
                "targetJobs": [{"name": "node"}],
                "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5en.48xlarge"}},
            },
        ]
    )
    return tr, tj


def inputs_d8():
    rjobs = wrapper_rjobs(extra={"image": "test:runtime"})
    rjobs[1]["template"]["spec"]["template"]["spec"]["containers"].append(
        {"name": "dataset-initializer", "image": "test:runtime"}
    )
    tr = training_runtime(rjobs=rjobs, ml_policy={"numNodes": 100})
    tj = trainjob(
        initializer={
            "dataset": {
                "storageUri": "hf://trainjob-dataset",
                "env": [{"name": "TRAIN_JOB", "value": "test:trainjob:dataset"}],
                "secretRef": {"name": "trainjob-secret-dataset"},
            },
            "model": {
                "storageUri": "hf://trainjob-model",
                "env": [{"name": "TRAIN_JOB", "value": "test:trainjob:model"}],
                "secretRef": {"name": "trainjob-secret-model"},
            },
        },
        trainer={},
    )
    return tr, tj


def inputs_d9():
    tr = training_runtime(
        rjobs=wrapper_rjobs(extra={"image": "test:runtime"}, depends_on=True),
        ml_policy={"numNodes": 100, "torch": {"numProcPerNode": "auto"}},
    )
    tj = trainjob(trainer={"numNodes": 30, "numProcPerNode": 3})
    return tr, tj


def inputs_d10():
    rjobs = wrapper_rjobs(extra={"image": "test:runtime"})
    rjobs[2]["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "TRAIN_JOB", "value": "original"},
        {"name": "RUNTIME", "value": "test:runtime"},
    ]
    tr = training_runtime(rjobs=rjobs, ml_policy={"numNodes": 100, "torch": {"numProcPerNode": "auto"}})
    tj = trainjob(
        trainer={
            "image": "test:trainjob",
            "resourcesPerNode": RES,
            "env": [
                {"name": "TRAIN_JOB", "value": "override"},
                {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
            ],
        }
    )
    return tr, tj


def _torchtune_node(command):
    return {
        "name": "node",
        "image": "ghcr.io/kubeflow/trainer/torchtune-trainer",
        "command": command,
        "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}],
    }


TUNE_1B_COMMAND = [
    "tune",
    "run",
    "--rdzv_endpoint=localhost:29500",
    "full_finetune_distributed",
    "--config",
    "llama3_2/1B_full",
    "dataset=torchtune.datasets.instruct_dataset",
    "dataset.source=parquet",
    "dataset.data_dir=/workspace/dataset/data",
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]


def inputs_d11():
    command = [
        "tune",
        "run",
        "full_finetune_distributed",
        "--config",
        "llama3_3/70B_full_multinode",
        "output_dir=/workspace/model/llama3_3/70B",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    tr = training_runtime(
        "torchtune-llama3.3-70b",
        rjobs=[rjob("node", "trainer", [_torchtune_node(command)])],
        ml_policy={"numNodes": 100, "torch": {"numProcPerNode": "auto"}},
    )
    tj = trainjob(
        runtime="torchtune-llama3.3-70b",
        trainer={
            "command": ["tune", "run"],
            "args": [
                "dtype=fp16",
                "batch_size=32",
                "epochs=10",
                "loss=torchtune.modules.loss.CEWithChunkedOutputLoss",
            ],
            "numNodes": 30,
            "numProcPerNode": 3,
        },
    )
    return tr, tj


def _tune_1b(args, gpus):
    tr = training_runtime(
        "torchtune-llama3.2-1b",
        rjobs=[rjob("node", "trainer", [_torchtune_node(list(TUNE_1B_COMMAND))])],
        ml_policy={"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
    )
    tj = trainjob(
        runtime="torchtune-llama3.2-1b",
        trainer={
            "command": ["tune", "run"],
            "args": args,
            "numNodes": 1,
            "numProcPerNode": "auto",
            "resourcesPerNode": {"limits": {"example.com/gpu": gpus}},
        },
    )
    return tr, tj


LORA = "model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]"


def inputs_d12():
    return _tune_1b([LORA], 2)


def inputs_d13():
    return _tune_1b([LORA, "model.quantize_base=True"], 1)


def inputs_d14():
    return _tune_1b([LORA, "model.quantize_base=True", "model.use_dora=True"], 2)


def inputs_d15():
    launcher = rjob(
        "launcher",
        None,
        [{"name": "node", "image": "test:runtime", "command": ["mpirun"], "args": ["echo.sh"]}],
    )
    node = rjob("node", "trainer", [{"name": "node", "image": "test:runtime", "resources": RES}])
    tr = training_runtime(
        rjobs=[launcher, node],
        ml_policy={
            "numNodes": 1,
            "mpi": {
                "numProcPerNode": 1,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": "/root/.ssh",
                "runLauncherAsNode": False,
            },
        },
    )
    tj = trainjob(trainer={"numNodes": 2, "numProcPerNode": 8})
    return tr, tj


def inputs_d17():
    tr = training_runtime(
        namespace=None,
        cluster=True,
        rjobs=wrapper_rjobs(extra=_res_containers(), depends_on=True),
        ml_policy={"numNodes": 100},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 120}},
    )
    tj = trainjob(
        kind="ClusterTrainingRuntime",
        suspend=True,
        trainer={
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": RES,
        },
    )
    return tr, tj


async def test_d1_labels_annotations_counts_and_podgroup() -> None:
    # spec: trainer D1
    assert await new_objects(*inputs_d1()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: test-job
            namespace: default
            labels: {conflictLabel: override}
            annotations: {conflictAnnotation: override}
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
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
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
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
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
                        image: test:runtime
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata:
                      labels: {scheduling.x-k8s.io/pod-group: test-job}
                  parallelism: 30
                  completions: 30
              replicas: 1
            suspend: true
        - apiVersion: scheduling.x-k8s.io/v1alpha1
          kind: PodGroup
          metadata:
            name: test-job
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          spec:
            minMember: 32
            minResources: {cpu: '32'}
            scheduleTimeoutSeconds: 120
    """
    )


async def test_d2_trainer_container_from_trainjob_without_podgroup() -> None:
    # spec: trainer D2
    assert await new_objects(*inputs_d2()) == load(
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
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
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
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/model}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
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
                        command: [trainjob]
                        args: [trainjob]
                        resources:
                          requests: {cpu: '1'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        env:
                        - {name: TRAIN_JOB, value: override}
                        - {name: RUNTIME, value: 'test:runtime'}
                        - {name: TRAIN_JOB_CUSTOM, value: 'test:trainjob'}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 100
                  completions: 100
              replicas: 1
    """
    )


async def test_d3_pod_template_overrides_strategic_merge() -> None:
    # spec: trainer D3
    assert await new_objects(*inputs_d3()) == load(
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
                      initContainers:
                      - name: override-init-container
                        env:
                        - {name: INIT_ENV, value: override_init}
                        - {name: NEW_VALUE, value: from_overrides}
                        - {name: DATASET_PATH, value: runtime}
                        resources: {}
                      containers:
                      - name: dataset-initializer
                        image: test:runtime
                        volumeMounts:
                        - {name: initializer_secret, mountPath: initializer_secret_mount_path}
                        - {name: initializer_claim, mountPath: initializer_claim_mount_path}
                        - {name: initializer, mountPath: /workspace/dataset}
                        resources: {}
                      volumes:
                      - name: initializer_secret
                        secret: {secretName: initializer_secret_name}
                      - name: initializer_claim
                        persistentVolumeClaim: {claimName: initializer_claim_name}
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                      affinity:
                        nodeAffinity:
                          requiredDuringSchedulingIgnoredDuringExecution:
                            nodeSelectorTerms:
                            - matchExpressions:
                              - key: topology.kubernetes.io/zone
                                operator: In
                                values: [antarctica-east1, antarctica-west1]
                      tolerations:
                      - {key: example.com/gpu, operator: Exists, effect: NoSchedule}
                      schedulingGates:
                      - {name: kueue.x-k8s.io/admission}
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
            - name: node
              groupName: default
              template:
                metadata:
                  labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
                spec:
                  template:
                    spec:
                      initContainers:
                      - name: override-init-container
                        env:
                        - {name: INIT_ENV, value: override_init}
                        resources: {}
                      containers:
                      - name: node
                        image: test:trainjob
                        volumeMounts:
                        - {name: node_secret, mountPath: node_secret_mount_path}
                        - {name: node_claim, mountPath: node_claim_mount_path}
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        env:
                        - {name: TRAIN_JOB, value: original}
                        resources: {}
                      - name: override-container
                        image: test:runtime
                        env:
                        - {name: CONTAINER_ENV, value: override_container}
                        resources: {}
                      volumes:
                      - name: node_secret
                        secret: {secretName: node_secret_name}
                      - name: node_claim
                        persistentVolumeClaim: {claimName: node_claim_name}
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      serviceAccountName: override-sa
                      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                      affinity:
                        nodeAffinity:
                          requiredDuringSchedulingIgnoredDuringExecution:
                            nodeSelectorTerms:
                            - matchExpressions:
                              - key: topology.kubernetes.io/zone
                                operator: In
                                values: [antarctica-east1, antarctica-west1]
                      tolerations:
                      - {key: example.com/gpu, operator: Exists, effect: NoSchedule}
                      schedulingGates:
                      - {name: kueue.x-k8s.io/admission}
                      imagePullSecrets:
                      - {name: registry-credential}
                    metadata: {}
                  parallelism: 100
                  completions: 100
              replicas: 1
    """
    )


async def test_d4_null_affinity_override_changes_nothing() -> None:
    # spec: trainer D4
    objects = await new_objects(*inputs_d4())
    assert objects == await new_objects(*inputs_d4_baseline())
    assert objects == load(
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d5_override_metadata_only_on_targeted_jobs() -> None:
    # spec: trainer D5
    assert await new_objects(*inputs_d5()) == load(
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
                    metadata:
                      labels: {k1: v1}
                      annotations: {a1: v1}
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata:
                      labels: {k2: v2}
                      annotations: {a2: v2}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d6_two_overrides_on_one_job_both_apply() -> None:
    # spec: trainer D6
    assert await new_objects(*inputs_d6()) == load(
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                      serviceAccountName: test-sa
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d7_later_override_wins() -> None:
    # spec: trainer D7
    assert await new_objects(*inputs_d7()) == load(
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                      nodeSelector: {node.kubernetes.io/instance-type: p5en.48xlarge}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d8_initializers_get_storage_uri_env_and_secret() -> None:
    # spec: trainer D8
    assert await new_objects(*inputs_d8()) == load(
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
                        env:
                        - {name: STORAGE_URI, value: 'hf://trainjob-dataset'}
                        - {name: TRAIN_JOB, value: 'test:trainjob:dataset'}
                        envFrom:
                        - secretRef: {name: trainjob-secret-dataset}
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
                        env:
                        - {name: STORAGE_URI, value: 'hf://trainjob-model'}
                        - {name: TRAIN_JOB, value: 'test:trainjob:model'}
                        envFrom:
                        - secretRef: {name: trainjob-secret-model}
                      - name: dataset-initializer
                        image: test:runtime
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 100
                  completions: 100
              replicas: 1
    """
    )


async def test_d9_torch_env_port_and_depends_on() -> None:
    # spec: trainer D9
    assert await new_objects(*inputs_d9()) == load(
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        resources: {}
                        env:
                        - {name: PET_NNODES, value: '30'}
                        - {name: PET_NPROC_PER_NODE, value: '3'}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        - {name: PET_MASTER_ADDR, value: test-job-node-0-0.test-job}
                        - {name: PET_MASTER_PORT, value: '29500'}
                        ports:
                        - {containerPort: 29500}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 30
                  completions: 30
              replicas: 1
              dependsOn:
              - {name: dataset-initializer, status: Complete}
              - {name: model-initializer, status: Complete}
    """
    )


async def test_d10_torch_auto_resolves_to_cpu_count_with_trainjob_env() -> None:
    # spec: trainer D10
    assert await new_objects(*inputs_d10()) == load(
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
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace/dataset}
                        - {name: initializer, mountPath: /workspace/model}
                        env:
                        - {name: TRAIN_JOB, value: override}
                        - {name: RUNTIME, value: 'test:runtime'}
                        - {name: TRAIN_JOB_CUSTOM, value: 'test:trainjob'}
                        - {name: PET_NNODES, value: '100'}
                        - {name: PET_NPROC_PER_NODE, value: '1'}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        - {name: PET_MASTER_ADDR, value: test-job-node-0-0.test-job}
                        - {name: PET_MASTER_PORT, value: '29500'}
                        resources:
                          requests: {cpu: '1'}
                        ports:
                        - {containerPort: 29500}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: initializer}
                    metadata: {}
                  parallelism: 100
                  completions: 100
              replicas: 1
    """
    )


async def test_d11_torchtune_multinode_command_rewrite() -> None:
    # spec: trainer D11
    assert await new_objects(*inputs_d11()) == load(
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer
                        command: [tune, run, '--rdzv_endpoint=test-job-node-0-0.test-job:29500', full_finetune_distributed,
                          --config, llama3_3/70B_full_multinode, output_dir=/workspace/model/llama3_3/70B, tokenizer.path=/workspace/model/original/tokenizer.model,
                          checkpointer.checkpoint_dir=/workspace/model]
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                        env:
                        - {name: PET_NNODES, value: '30'}
                        - {name: PET_NPROC_PER_NODE, value: '3'}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                        args: [dtype=fp16, batch_size=32, epochs=10, loss=torchtune.modules.loss.CEWithChunkedOutputLoss]
                    metadata: {}
                  parallelism: 30
                  completions: 30
              replicas: 1
    """
    )


async def test_d12_torchtune_lora_distributed() -> None:
    # spec: trainer D12
    assert await new_objects(*inputs_d12()) == load(
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer
                        command: [tune, run, '--rdzv_endpoint=test-job-node-0-0.test-job:29500', lora_finetune_distributed,
                          --config, llama3_2/1B_lora, output_dir=/workspace/output, tokenizer.path=/workspace/model/original/tokenizer.model,
                          checkpointer.checkpoint_dir=/workspace/model]
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources:
                          limits: {example.com/gpu: '2'}
                        env:
                        - {name: PET_NNODES, value: '1'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                        args: ['model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]']
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d13_torchtune_qlora_single_device() -> None:
    # spec: trainer D13
    assert await new_objects(*inputs_d13()) == load(
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer
                        command: [tune, run, lora_finetune_single_device, --config, llama3_2/1B_qlora_single_device, output_dir=/workspace/output,
                          tokenizer.path=/workspace/model/original/tokenizer.model, checkpointer.checkpoint_dir=/workspace/model]
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources:
                          limits: {example.com/gpu: '1'}
                        env:
                        - {name: PET_NNODES, value: '1'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                        args: ['model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]', model.quantize_base=True]
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d14_torchtune_dora_disables_qlora() -> None:
    # spec: trainer D14
    assert await new_objects(*inputs_d14()) == load(
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer
                        command: [tune, run, '--rdzv_endpoint=test-job-node-0-0.test-job:29500', lora_finetune_distributed,
                          --config, llama3_2/1B_lora, output_dir=/workspace/output, tokenizer.path=/workspace/model/original/tokenizer.model,
                          checkpointer.checkpoint_dir=/workspace/model]
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources:
                          limits: {example.com/gpu: '2'}
                        env:
                        - {name: PET_NNODES, value: '1'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                        args: ['model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]', model.quantize_base=True, model.use_dora=True]
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
    """
    )


async def test_d15_mpi_secret_hostfile_volumes_and_env() -> None:
    # spec: trainer D15
    assert await new_objects(*inputs_d15()) == load(
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
            - name: launcher
              groupName: default
              template:
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: test:runtime
                        command: [mpirun]
                        args: [echo.sh]
                        resources: {}
                        env:
                        - {name: OMPI_MCA_orte_default_hostfile, value: /etc/mpi/hostfile}
                        - {name: OMPI_MCA_orte_keep_fqdn_hostnames, value: 'true'}
                        - {name: OMPI_MCA_orte_set_default_slots, value: '8'}
                        - {name: OMPI_MCA_plm_rsh_args, value: -o ConnectionAttempts=10}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /root/.ssh}
                        - {name: mpi-hostfile, mountPath: /etc/mpi}
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
                metadata: {}
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
                          requests: {cpu: '1'}
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
                  parallelism: 2
                  completions: 2
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
              test-job-node-0-0.test-job slots=8
              test-job-node-0-1.test-job slots=8
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


async def test_d16_missing_training_runtime() -> None:
    # spec: trainer D16
    with pytest.raises(RuntimeFailure) as failure:
        await new_objects(None, trainjob(runtime="test-runtime-3"))
    assert failure.value.message == (
        "TrainingRuntime specified in TrainJob is not found: "
        'TrainingRuntime.trainer.kubeflow.org "test-runtime-3" not found'
    )


async def test_d17_cluster_training_runtime_objects() -> None:
    # spec: trainer D17
    assert await new_objects(*inputs_d17()) == load(
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
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
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
                        command: [runtime]
                        args: [runtime]
                        resources:
                          requests: {cpu: '1'}
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
                        command: [trainjob]
                        args: [trainjob]
                        resources:
                          requests: {cpu: '1'}
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
              dependsOn:
              - {name: dataset-initializer, status: Complete}
              - {name: model-initializer, status: Complete}
            suspend: true
        - apiVersion: scheduling.x-k8s.io/v1alpha1
          kind: PodGroup
          metadata:
            name: test-job
            namespace: default
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: test-job, uid: uid, controller: true, blockOwnerDeletion: true}
          spec:
            minMember: 102
            minResources: {cpu: '102'}
            scheduleTimeoutSeconds: 120
    """
    )


async def test_d18_missing_cluster_training_runtime() -> None:
    # spec: trainer D18
    with pytest.raises(RuntimeFailure) as failure:
        await new_objects(None, trainjob(kind="ClusterTrainingRuntime"))
    assert failure.value.message == (
        "not found ClusterTrainingRuntime specified in TrainJob: "
        'ClusterTrainingRuntime.trainer.kubeflow.org "test-runtime" not found'
    )


async def test_bad_trainjob_becomes_runtime_failure_with_field_path() -> None:
    tj = trainjob(trainer={"numNodes": "many"})
    with pytest.raises(RuntimeFailure) as failure:
        await new_objects(training_runtime(), tj)
    assert [e.field for e in failure.value.field_errors] == ["spec.trainer.numNodes"]


async def test_empty_trainjob_args_replace_the_runtime_args_and_are_not_written() -> None:
    """Go sets the (empty) slice and omitempty drops it: the runtime's args are gone from the document."""
    runtime = training_runtime(
        rjobs=[rjob("node", "trainer", [{"name": "node", "command": ["a"], "args": ["b"]}])]
    )
    objects = await new_objects(runtime, trainjob(trainer={"command": [], "args": []}))
    assert objects[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"] == [
        {"name": "node", "resources": {}}
    ]
