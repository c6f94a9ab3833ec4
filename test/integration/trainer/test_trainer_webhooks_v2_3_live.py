"""Level v2.3's runtime admission and torchtune rules through a kube-apiserver with the v2.3 CRDs and
``python -m trainer --api-level=v2.3`` serving the webhooks (docs/behaviour/trainer.md §12.5):

* the v2.3 CRDs' rules on runtimes are the API server's (two ML policies, ``flux.numProcPerNode``
  0, an ``envInjection`` target naming ``node``), answered before any webhook;
* the runtime webhook keeps v2.1.0's rules, printing a bad container list as Go marshals it, and
  warns about a deprecated ClusterTrainingRuntime with the v2.3 policy link;
* torchtune TrainJobs: LoRA on several nodes and args setting a config the runtime manages are
  refused with v2.3.0's words, ``model.quantize_base=False`` is not QLoRA (the JobSet gets the LoRA
  recipe), a TrainJob without ``numNodes`` counts as one node;
* an AdmissionReview the API server would refuse before admission, POSTed to the manager's
  validating webhook, is decoded with v2.3.0's types (``status.trainerStatus`` typed): 400 with
  encoding/json's words.

The control plane, the manager and the webhook configurations are those of
``test_trainer_level_v2_3_live.py``'s fixtures (this module starts its own instance of them).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp
import pytest
import test_trainer_level_v2_3_live as base
from trainer_process import RunningManager, review

from manager.client import Client, Forbidden, Invalid
from manager.envtest import Environment
from manager.testing import eventually
from trainer.runtime.objects import JOBSET_GVK

Json = dict[str, Any]

env_v2_3 = base.env_v2_3
api = base.api
namespace = base.namespace
manager = base.manager
webhooks = base.webhooks

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
LORA = "model.lora_attn_modules=[q_proj, v_proj, output_proj]"
V2_3_POLICY = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
DENIED_TJ = 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '


def runtime(namespace: str | None, name: str, ml_policy: Json | None = None, **pod: Any) -> Json:
    pod_spec = {"containers": [{"name": "node", "image": "busybox", "command": ["tune", "run"]}], **pod}
    node = {
        "name": "node",
        "template": {"metadata": {"labels": {ANCESTOR: "trainer"}}, "spec": {"template": {"spec": pod_spec}}},
    }
    spec: Json = {"template": {"spec": {"replicatedJobs": [node]}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    metadata: Json = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    kind = "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime"
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}


def tune_job(namespace: str, name: str, runtime_name: str, **trainer: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime_name, "kind": "TrainingRuntime"},
            "trainer": {"command": ["tune", "run"], **trainer},
        },
    }


# -- runtimes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ml_policy", "message"),
    [
        (
            {"torch": {}, "mpi": {}},
            "spec.mlPolicy: Invalid value: Only one of the policy can be configured",
        ),
        ({"flux": {"numProcPerNode": 0}}, "NumProcPerNode in fluxPolicy must be >= 1"),
        (
            {"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["node"]}]}}},
            "containerNames must not include the main node container because PET_* envs are always injected into it",
        ),
    ],
)
async def test_the_v2_3_crds_refuse_bad_ml_policies_before_the_webhook(
    api: Client, namespace: str, webhooks: None, ml_policy: Json, message: str
) -> None:
    with pytest.raises(Invalid) as refused:
        await api.create(runtime(namespace, "bad", ml_policy))
    assert message in str(refused.value)
    assert "admission webhook" not in str(refused.value)


async def test_the_runtime_webhook_prints_the_containers_as_go_marshals_them(
    api: Client, namespace: str, webhooks: None
) -> None:
    bad = runtime(namespace, "no-node")
    job = bad["spec"]["template"]["spec"]["replicatedJobs"][0]
    job["replicas"] = 2
    job["template"]["spec"]["template"]["spec"]["containers"] = [
        {"name": "trainer", "image": "busybox", "env": [{"name": "A", "value": "b"}]}
    ]
    with pytest.raises(Forbidden) as refused:
        await api.create(bad)
    assert str(refused.value) == (
        'admission webhook "validator.trainingruntime.trainer.kubeflow.org" denied the request: '
        "[spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1, "
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: "
        '[{"name":"trainer","image":"busybox","env":[{"name":"A","value":"b"}],"resources":{}}]: '
        "must contain the required container for the ancestor: trainer]"
    )


async def test_a_deprecated_cluster_runtime_is_warned_about_with_the_v2_3_policy_link(
    env_v2_3: Environment, webhooks: None
) -> None:
    name = f"deprecated-{uuid.uuid4().hex[:6]}"
    ctr = runtime(None, name)
    ctr["metadata"]["labels"] = {"trainer.kubeflow.org/support": "deprecated"}
    ctx = env_v2_3.ssl_context()
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
        session.post(
            env_v2_3.url + "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes",
            data=json.dumps(ctr),
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        assert response.status == 201, await response.text()
        warnings = response.headers.getall("Warning", [])
    try:
        assert warnings == [
            f'299 - "ClusterTrainingRuntime \\"{name}\\" is deprecated and will be removed in a future release '
            f'of Kubeflow Trainer. See runtime deprecation policy: {V2_3_POLICY}"'
        ]
    finally:
        await env_v2_3.request(
            "DELETE", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/{name}"
        )


# -- torchtune --------------------------------------------------------------------------------------------


async def test_v2_3_torchtune_refuses_lora_on_two_nodes_and_managed_configs(
    api: Client, namespace: str, webhooks: None
) -> None:
    await api.create(runtime(namespace, "torchtune-llama3.3-70b", {"torch": {}}))
    await api.create(runtime(namespace, "torchtune-llama3.2-1b", {"torch": {}}))

    async def refused(tj: Json) -> str:
        async def denied() -> str:
            try:
                await api.create(tj)
            except Forbidden as err:
                # the runtime just created may not be in the webhook's cache yet: look again
                assert "must be created before" not in str(err), str(err)
                return str(err)
            raise RuntimeError(f"TrainJob {tj['metadata']['name']} was admitted")

        return await eventually(denied, message="the TrainJob was not refused as expected")

    lora = tune_job(namespace, "lora", "torchtune-llama3.3-70b", numNodes=2, args=[LORA])
    assert await refused(lora) == DENIED_TJ + (
        "spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node training in TorchTune"
    )
    managed = tune_job(
        namespace,
        "managed",
        "torchtune-llama3.2-1b",
        numNodes=1,
        args=["output_dir=/mine", "epochs=1", "tokenizer.path=/t"],
    )
    assert await refused(managed) == DENIED_TJ + (
        '[spec.trainer.args[0]: Invalid value: "output_dir=/mine": must not set immutable config "output_dir" in '
        'trainer args; it is managed by the runtime, spec.trainer.args[2]: Invalid value: "tokenizer.path=/t": '
        'must not set immutable config "tokenizer.path" in trainer args; it is managed by the runtime]'
    )


async def test_v2_3_torchtune_reads_quantize_base_by_value_and_defaults_one_node(
    api: Client, namespace: str, webhooks: None
) -> None:
    await api.create(runtime(namespace, "torchtune-llama3.2-1b", {"torch": {}}))
    # two GPUs: QLoRA's size rule would refuse this; quantize_base=False is LoRA at v2.3.0
    lora = tune_job(
        namespace,
        "lora",
        "torchtune-llama3.2-1b",
        numNodes=1,
        args=[LORA, "model.quantize_base=False"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": "2"}},
    )
    await eventually(lambda: api.create(lora), retry_on=(Forbidden,), message="the TrainJob was refused")
    no_nodes = tune_job(namespace, "no-nodes", "torchtune-llama3.2-1b", numProcPerNode=1)
    await api.create(no_nodes)

    async def command(name: str) -> list[str]:
        jobset = await api.get(JOBSET_GVK, name, namespace)
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        return list(pod["containers"][0]["command"])

    assert await eventually(lambda: command("lora"), retry_on=(Exception,), message="no JobSet lora") == [
        "tune",
        "run",
        "--rdzv_endpoint=lora-node-0-0.lora:29500",
        "lora_finetune_distributed",
        "--config",
        "llama3_2/1B_lora",
    ]
    assert await eventually(
        lambda: command("no-nodes"), retry_on=(Exception,), message="no JobSet no-nodes"
    ) == [
        "tune",
        "run",
        "full_finetune_single_device",
        "--config",
        "llama3_2/1B_full_single_device",
    ]


# -- typed decoding, straight to the manager's webhook ----------------------------------------------------


async def test_the_validators_decode_with_v2_3_0s_types(manager: RunningManager, namespace: str) -> None:
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "x", "namespace": namespace},
        "spec": {"runtimeRef": {"name": "torch"}},
        "status": {"trainerStatus": {"progressPercentage": "50"}},
    }
    answer = await review(manager, "/validate-trainer-kubeflow-org-v1alpha1-trainjob", tj)
    assert (answer["allowed"], answer["status"]["code"], answer["status"]["message"]) == (
        False,
        400,
        "json: cannot unmarshal string into Go struct field TrainerStatus.status.trainerStatus.progressPercentage "
        "of type int32",
    )
    rt = runtime(namespace, "x", {"flux": {"numProcPerNode": "4"}})
    answer = await review(manager, "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime", rt)
    assert (answer["allowed"], answer["status"]["code"], answer["status"]["message"]) == (
        False,
        400,
        "json: cannot unmarshal string into Go struct field FluxMLPolicySource.spec.mlPolicy.MLPolicySource.flux.numProcPerNode "
        "of type int32",
    )
