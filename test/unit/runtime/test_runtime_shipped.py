"""The shipped runtimes (config/runtimes, docs/behaviour/trainer.md §8): for each, a TrainJob gives upstream's objects.

Each runtime file is loaded as the API server would store it (CRD defaults filled in), a
TrainJob is run through ``NewObjects`` and the result compared with the objects written out
below; the same TrainJobs pass the runtime's plugin validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from runtime_fixtures import FakeReader, RecordingIndexer, load, redact_ssh_secret, sort_objects, trainjob

from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]


RUNTIMES = Path(__file__).resolve().parents[3] / "config" / "runtimes"


def shipped_runtime(name: str) -> Json:
    """A shipped runtime as the API server stores it: CRD defaults filled in (groupName, replicas)."""
    path = next(RUNTIMES.rglob(f"{name}.yaml"))
    runtime = yaml.safe_load(path.read_text())
    ClusterTrainingRuntime.from_dict(runtime)
    for item in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        item.setdefault("groupName", "default")
        item.setdefault("replicas", 1)
    return runtime


def stored_trainjob(name: str, runtime: str, **spec: Any) -> Json:
    """A TrainJob as the API server stores it (suspend and managedBy defaulted)."""
    tj = trainjob(
        name=name, namespace="ns", uid=f"{name}-uid", runtime=runtime, kind="ClusterTrainingRuntime", **spec
    )
    tj["spec"].setdefault("suspend", False)
    tj["spec"]["managedBy"] = "trainer.kubeflow.org/trainjob-controller"
    return tj


def inputs_torch_distributed():
    tj = stored_trainjob(
        "my-job",
        "torch-distributed",
        trainer={
            "numNodes": 2,
            "command": ["torchrun", "train.py"],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}},
            "env": [{"name": "FOO", "value": "bar"}],
        },
    )
    return shipped_runtime("torch-distributed"), tj


def inputs_deepspeed_distributed():
    return shipped_runtime("deepspeed-distributed"), stored_trainjob(
        "ds", "deepspeed-distributed", trainer={"numNodes": 3}
    )


def inputs_mlx_distributed():
    tj = stored_trainjob(
        "mlx",
        "mlx-distributed",
        trainer={
            "numNodes": 2,
            "command": ["mpirun", "--hostfile", "/etc/mpi/hostfile", "python3", "train.py"],
            "resourcesPerNode": {"requests": {"cpu": "2"}},
            "env": [{"name": "MLX_LOG", "value": "debug"}],
        },
    )
    return shipped_runtime("mlx-distributed"), tj


def inputs_torchtune_llama3_2_1b():
    tj = stored_trainjob(
        "tune-1b",
        "torchtune-llama3.2-1b",
        initializer={"dataset": {"storageUri": "hf://tatsu-lab/alpaca/data"}},
        trainer={
            "command": ["tune", "run"],
            "args": ["model.lora_attn_modules=[q_proj,v_proj,output_proj]"],
            "numNodes": 1,
        },
    )
    return shipped_runtime("torchtune-llama3.2-1b"), tj


def inputs_torchtune_llama3_2_3b():
    tj = stored_trainjob(
        "tune-3b",
        "torchtune-llama3.2-3b",
        trainer={
            "command": ["tune", "run"],
            "numNodes": 1,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},
        },
    )
    return shipped_runtime("torchtune-llama3.2-3b"), tj


def inputs_torchtune_qwen2_5_1_5b():
    tj = stored_trainjob(
        "tune-qwen", "torchtune-qwen2.5-1.5b", trainer={"command": ["tune", "run"], "numNodes": 1}
    )
    return shipped_runtime("torchtune-qwen2.5-1.5b"), tj


def inputs_torch_distributed_with_cache():
    tj = stored_trainjob(
        "cached", "torch-distributed-with-cache", trainer={"numNodes": 2, "command": ["torchrun", "train.py"]}
    )
    return shipped_runtime("torch-distributed-with-cache"), tj


async def new_objects(runtime: Json, tj: Json) -> list[Json]:
    runtimes = await new_runtimes(FakeReader([runtime]), RecordingIndexer())
    return redact_ssh_secret(sort_objects(await runtimes[CLUSTER_TRAINING_RUNTIME_KEY].new_objects(tj)))


def test_every_shipped_runtime_is_tested() -> None:
    shipped = sorted(p.stem for p in RUNTIMES.rglob("*.yaml") if p.name != "kustomization.yaml")
    tested = sorted(
        name.removeprefix("inputs_").replace("_", "-") for name in globals() if name.startswith("inputs_")
    )
    assert [s.replace(".", "-") for s in shipped] == tested


@pytest.mark.parametrize("name", [n for n in dir() if n.startswith("inputs_")])
async def test_shipped_runtime_accepts_its_trainjob(name: str) -> None:
    runtime, tj = globals()[name]()
    runtimes = await new_runtimes(FakeReader([runtime]), RecordingIndexer())
    assert await runtimes[CLUSTER_TRAINING_RUNTIME_KEY].validate_objects(None, tj) == ([], [])


async def test_torch_distributed_worked_example() -> None:
    assert await new_objects(*inputs_torch_distributed()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: my-job
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: my-job, uid: my-job-uid, controller: true,
              blockOwnerDeletion: true}
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
                        image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
                        resources:
                          limits: {nvidia.com/gpu: '4'}
                        env:
                        - {name: FOO, value: bar}
                        - {name: PET_NNODES, value: '2'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        - {name: PET_MASTER_ADDR, value: my-job-node-0-0.my-job}
                        - {name: PET_MASTER_PORT, value: '29500'}
                        ports:
                        - {containerPort: 29500}
                        command: [torchrun, train.py]
                    metadata: {}
                  parallelism: 2
                  completions: 2
              replicas: 1
            suspend: false
    """
    )


async def test_deepspeed_distributed_worked_example() -> None:
    assert await new_objects(*inputs_deepspeed_distributed()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: ds
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: ds, uid: ds-uid, controller: true, blockOwnerDeletion: true}
          spec:
            replicatedJobs:
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
                        image: ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.1.0
                        securityContext: {runAsUser: 1000}
                        resources: {}
                        env:
                        - {name: OMPI_MCA_orte_default_hostfile, value: /etc/mpi/hostfile}
                        - {name: OMPI_MCA_orte_keep_fqdn_hostnames, value: 'true'}
                        - {name: OMPI_MCA_orte_set_default_slots, value: '1'}
                        - {name: OMPI_MCA_plm_rsh_args, value: -o ConnectionAttempts=10}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /home/mpiuser/.ssh}
                        - {name: mpi-hostfile, mountPath: /etc/mpi}
                      volumes:
                      - name: mpi-ssh-auth
                        secret:
                          secretName: ds-mpi-ssh-auth
                          items:
                          - {key: ssh-privatekey, path: id_rsa}
                          - {key: ssh-publickey, path: id_rsa.pub}
                          - {key: ssh-publickey, path: authorized_keys}
                      - name: mpi-hostfile
                        configMap:
                          name: ds-mpi-hostfile
                          items:
                          - {key: hostfile, path: hostfile, mode: 292}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: node
              groupName: default
              template:
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.1.0
                        securityContext: {runAsUser: 1000}
                        command: [/usr/sbin/sshd]
                        args: [-De, -f, /home/mpiuser/.sshd_config]
                        readinessProbe:
                          tcpSocket: {port: 2222}
                          initialDelaySeconds: 5
                        resources: {}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /home/mpiuser/.ssh}
                      volumes:
                      - name: mpi-ssh-auth
                        secret:
                          secretName: ds-mpi-ssh-auth
                          items:
                          - {key: ssh-privatekey, path: id_rsa}
                          - {key: ssh-publickey, path: id_rsa.pub}
                          - {key: ssh-publickey, path: authorized_keys}
                    metadata: {}
                  parallelism: 2
                  completions: 2
                metadata: {}
              replicas: 1
            network: {publishNotReadyAddresses: true}
            successPolicy:
              operator: All
              targetReplicatedJobs: [launcher]
            suspend: false
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: ds-mpi-hostfile
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: ds, uid: ds-uid, controller: true, blockOwnerDeletion: true}
          data:
            hostfile: |
              ds-launcher-0-0.ds slots=1
              ds-node-0-0.ds slots=1
              ds-node-0-1.ds slots=1
        - apiVersion: v1
          kind: Secret
          metadata:
            name: ds-mpi-ssh-auth
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: ds, uid: ds-uid, controller: true, blockOwnerDeletion: true}
          type: kubernetes.io/ssh-auth
          immutable: true
          data: {ssh-privatekey: <private key>, ssh-publickey: <public key>}
    """
    )


async def test_mlx_distributed() -> None:
    assert await new_objects(*inputs_mlx_distributed()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: mlx
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: mlx, uid: mlx-uid, controller: true, blockOwnerDeletion: true}
          spec:
            replicatedJobs:
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
                        image: ghcr.io/kubeflow/trainer/mlx-runtime:v2.1.0
                        securityContext: {runAsUser: 1000}
                        resources:
                          requests: {cpu: '2'}
                        env:
                        - {name: OMPI_MCA_orte_default_hostfile, value: /etc/mpi/hostfile}
                        - {name: OMPI_MCA_orte_keep_fqdn_hostnames, value: 'true'}
                        - {name: OMPI_MCA_orte_set_default_slots, value: '1'}
                        - {name: OMPI_MCA_plm_rsh_args, value: -o ConnectionAttempts=10}
                        - {name: MLX_LOG, value: debug}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /home/mpiuser/.ssh}
                        - {name: mpi-hostfile, mountPath: /etc/mpi}
                        command: [mpirun, --hostfile, /etc/mpi/hostfile, python3, train.py]
                      volumes:
                      - name: mpi-ssh-auth
                        secret:
                          secretName: mlx-mpi-ssh-auth
                          items:
                          - {key: ssh-privatekey, path: id_rsa}
                          - {key: ssh-publickey, path: id_rsa.pub}
                          - {key: ssh-publickey, path: authorized_keys}
                      - name: mpi-hostfile
                        configMap:
                          name: mlx-mpi-hostfile
                          items:
                          - {key: hostfile, path: hostfile, mode: 292}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
            - name: node
              groupName: default
              template:
                spec:
                  template:
                    spec:
                      containers:
                      - name: node
                        image: ghcr.io/kubeflow/trainer/mlx-runtime:v2.1.0
                        securityContext: {runAsUser: 1000}
                        command: [/usr/sbin/sshd]
                        args: [-De, -f, /home/mpiuser/.sshd_config]
                        readinessProbe:
                          tcpSocket: {port: 2222}
                          initialDelaySeconds: 5
                        resources:
                          requests: {cpu: '2'}
                        volumeMounts:
                        - {name: mpi-ssh-auth, mountPath: /home/mpiuser/.ssh}
                        env:
                        - {name: MLX_LOG, value: debug}
                      volumes:
                      - name: mpi-ssh-auth
                        secret:
                          secretName: mlx-mpi-ssh-auth
                          items:
                          - {key: ssh-privatekey, path: id_rsa}
                          - {key: ssh-publickey, path: id_rsa.pub}
                          - {key: ssh-publickey, path: authorized_keys}
                    metadata: {}
                  parallelism: 1
                  completions: 1
                metadata: {}
              replicas: 1
            network: {publishNotReadyAddresses: true}
            successPolicy:
              operator: All
              targetReplicatedJobs: [launcher]
            suspend: false
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: mlx-mpi-hostfile
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: mlx, uid: mlx-uid, controller: true, blockOwnerDeletion: true}
          data:
            hostfile: |
              mlx-launcher-0-0.mlx slots=1
              mlx-node-0-0.mlx slots=1
        - apiVersion: v1
          kind: Secret
          metadata:
            name: mlx-mpi-ssh-auth
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: mlx, uid: mlx-uid, controller: true, blockOwnerDeletion: true}
          type: kubernetes.io/ssh-auth
          immutable: true
          data: {ssh-privatekey: <private key>, ssh-publickey: <public key>}
    """
    )


async def test_torchtune_llama3_2_1b_lora() -> None:
    assert await new_objects(*inputs_torchtune_llama3_2_1b()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: tune-1b
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: tune-1b, uid: tune-1b-uid, controller: true,
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
                        image: ghcr.io/kubeflow/trainer/dataset-initializer:v2.1.0
                        env:
                        - {name: STORAGE_URI, value: 'hf://tatsu-lab/alpaca/data'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-llama3.2-1b}
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
                        image: ghcr.io/kubeflow/trainer/model-initializer:v2.1.0
                        env:
                        - {name: STORAGE_URI, value: 'hf://meta-llama/Llama-3.2-1B-Instruct'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-llama3.2-1b}
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer:v2.1.0
                        command: [tune, run, '--rdzv_endpoint=tune-1b-node-0-0.tune-1b:29500', lora_finetune_distributed,
                          --config, llama3_2/1B_lora, output_dir=/workspace/output, tokenizer.path=/workspace/model/original/tokenizer.model,
                          checkpointer.checkpoint_dir=/workspace/model]
                        resources:
                          limits: {nvidia.com/gpu: '2'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        env:
                        - {name: PET_NNODES, value: '1'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                        args: ['model.lora_attn_modules=[q_proj,v_proj,output_proj]']
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-llama3.2-1b}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
              dependsOn:
              - {name: dataset-initializer, status: Complete}
              - {name: model-initializer, status: Complete}
            suspend: false
    """
    )


async def test_torchtune_llama3_2_3b_single_device() -> None:
    assert await new_objects(*inputs_torchtune_llama3_2_3b()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: tune-3b
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: tune-3b, uid: tune-3b-uid, controller: true,
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
                        image: ghcr.io/kubeflow/trainer/dataset-initializer:v2.1.0
                        env:
                        - {name: STORAGE_URI, value: 'hf://tatsu-lab/alpaca'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-llama3.2-3b}
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
                        image: ghcr.io/kubeflow/trainer/model-initializer:v2.1.0
                        env:
                        - {name: STORAGE_URI, value: 'hf://meta-llama/Llama-3.2-3B-Instruct'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-llama3.2-3b}
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer:v2.1.0
                        command: [tune, run, full_finetune_single_device, --config, llama3_2/3B_full_single_device, output_dir=/workspace/output,
                          tokenizer.path=/workspace/model/original/tokenizer.model, checkpointer.checkpoint_dir=/workspace/model]
                        resources:
                          limits: {nvidia.com/gpu: '1'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        env:
                        - {name: PET_NNODES, value: '1'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-llama3.2-3b}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
              dependsOn:
              - {name: dataset-initializer, status: Complete}
              - {name: model-initializer, status: Complete}
            suspend: false
    """
    )


async def test_torchtune_qwen2_5_1_5b_keeps_merges_file() -> None:
    assert await new_objects(*inputs_torchtune_qwen2_5_1_5b()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: tune-qwen
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: tune-qwen, uid: tune-qwen-uid, controller: true,
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
                        image: ghcr.io/kubeflow/trainer/dataset-initializer:v2.1.0
                        env:
                        - {name: STORAGE_URI, value: 'hf://tatsu-lab/alpaca'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-qwen2.5-1.5b}
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
                        image: ghcr.io/kubeflow/trainer/model-initializer:v2.1.0
                        env:
                        - {name: STORAGE_URI, value: 'hf://Qwen/Qwen2.5-1.5B-Instruct'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        resources: {}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-qwen2.5-1.5b}
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
                        image: ghcr.io/kubeflow/trainer/torchtune-trainer:v2.1.0
                        command: [tune, run, '--rdzv_endpoint=tune-qwen-node-0-0.tune-qwen:29500', full_finetune_distributed,
                          --config, qwen2_5/1.5B_full, output_dir=/workspace/output, tokenizer.path=/workspace/model/vocab.json,
                          tokenizer.merges_file=/workspace/model/merges.txt, checkpointer.checkpoint_dir=/workspace/model]
                        resources:
                          limits: {nvidia.com/gpu: '2'}
                        volumeMounts:
                        - {name: initializer, mountPath: /workspace}
                        env:
                        - {name: PET_NNODES, value: '1'}
                        - {name: PET_NPROC_PER_NODE, value: auto}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        ports:
                        - {containerPort: 29500}
                      volumes:
                      - name: initializer
                        persistentVolumeClaim: {claimName: torchtune-qwen2.5-1.5b}
                    metadata: {}
                  parallelism: 1
                  completions: 1
              replicas: 1
              dependsOn:
              - {name: dataset-initializer, status: Complete}
              - {name: model-initializer, status: Complete}
            suspend: false
    """
    )


async def test_torch_distributed_with_cache() -> None:
    assert await new_objects(*inputs_torch_distributed_with_cache()) == load(
        """
        - apiVersion: jobset.x-k8s.io/v1alpha2
          kind: JobSet
          metadata:
            name: cached
            namespace: ns
            ownerReferences:
            - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: cached, uid: cached-uid, controller: true,
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
                      serviceAccountName: kubeflow-trainer-cache-initializer
                      containers:
                      - name: dataset-initializer
                        image: ghcr.io/kubeflow/trainer/dataset-initializer:v2.1.0
                        env:
                        - {name: CACHE_IMAGE, value: 'ghcr.io/kubeflow/trainer/data-cache:v2.1.0'}
                        - name: TRAIN_JOB_NAME
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.labels[''jobset.sigs.k8s.io/jobset-name'']'}
                        resources: {}
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
                        image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
                        env:
                        - name: TRAIN_JOB_NAME
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.labels[''jobset.sigs.k8s.io/jobset-name'']'}
                        - {name: PET_NNODES, value: '2'}
                        - {name: PET_NPROC_PER_NODE, value: '1'}
                        - name: PET_NODE_RANK
                          valueFrom:
                            fieldRef: {fieldPath: 'metadata.annotations[''batch.kubernetes.io/job-completion-index'']'}
                        - {name: PET_MASTER_ADDR, value: cached-node-0-0.cached}
                        - {name: PET_MASTER_PORT, value: '29500'}
                        resources: {}
                        ports:
                        - {containerPort: 29500}
                        command: [torchrun, train.py]
                    metadata: {}
                  parallelism: 2
                  completions: 2
              replicas: 1
              dependsOn:
              - {name: dataset-initializer, status: Complete}
            suspend: false
    """
    )
