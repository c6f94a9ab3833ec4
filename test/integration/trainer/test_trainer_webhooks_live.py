"""The Trainer's validating webhooks called by a real API server (docs/behaviour/trainer.md §10 B4-B13, §5.1, §5.2)."""

from __future__ import annotations

import contextlib
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from trainer_wrappers import rjob, runtime, trainjob, wrapper_rjobs

from manager.client import Forbidden, NotFound
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

Json = dict[str, Any]
TR = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime")
CTR = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
TJ_DENIED = 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '


@pytest.fixture
async def runtimes(trainer: Any) -> AsyncIterator[str]:
    """TR ``training-runtime`` (wrapper) in the namespace and a CTR wrapper without labels; yields the CTR name."""
    client, ns = trainer.client, trainer.namespace
    await client.create(runtime("training-runtime", ns))
    ctr_name = f"training-runtime-{ns}"
    await client.create(runtime(ctr_name, None, rjobs=wrapper_rjobs(labels=False)))
    try:
        yield ctr_name
    finally:
        with contextlib.suppress(NotFound):
            await client.delete_by_name(CTR, ctr_name)


async def _update_tr(trainer: Any, change: Any) -> None:
    """Change the TrainingRuntime (updates are never validated) and wait until the manager's cache has it.

    The webhook judges TrainJobs by the cached runtime, as upstream does.
    """
    current: Json = await trainer.client.get(TR, "training-runtime", trainer.namespace)
    change(current)
    updated: Json = await trainer.client.update(current)

    async def cached() -> None:
        seen = await trainer.manager.cache.get(TR, "training-runtime", trainer.namespace)
        assert seen["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]

    await eventually(cached, timeout=30)


async def test_trainjob_referencing_existing_runtimes_is_admitted(trainer: Any, runtimes: str) -> None:
    # spec: trainer A26 A27
    # (the fixture created the TR and CTR wrappers through the runtime webhooks)
    # spec: trainer B4
    # spec: trainer B6
    client, ns = trainer.client, trainer.namespace
    await client.create(trainjob("train-job", ns, "training-runtime"))
    await client.create(trainjob("train-job-ctr", ns, runtimes, kind="ClusterTrainingRuntime"))


async def test_missing_training_runtime_is_forbidden_with_upstream_text(trainer: Any, runtimes: str) -> None:
    # spec: trainer B5
    with pytest.raises(Forbidden) as denied:
        await trainer.client.create(trainjob("train-job", trainer.namespace, "invalid"))
    assert str(denied.value) == (
        TJ_DENIED + 'spec.runtimeRef: Invalid value: {"name":"invalid","apiGroup":"trainer.kubeflow.org",'
        '"kind":"TrainingRuntime"}: TrainingRuntime.trainer.kubeflow.org "invalid" not found: '
        "specified trainingRuntime must be created before the TrainJob is created"
    )


async def test_missing_cluster_training_runtime_is_forbidden_with_upstream_text(
    trainer: Any, runtimes: str
) -> None:
    # spec: trainer B2
    with pytest.raises(Forbidden) as denied:
        await trainer.client.create(
            trainjob("train-job", trainer.namespace, "absent", kind="ClusterTrainingRuntime")
        )
    assert str(denied.value) == (
        TJ_DENIED + 'spec.RuntimeRef: Invalid value: {"name":"absent","apiGroup":"trainer.kubeflow.org",'
        '"kind":"ClusterTrainingRuntime"}: ClusterTrainingRuntime.trainer.kubeflow.org "absent" not found: '
        "specified clusterTrainingRuntime must be created before the TrainJob is created"
    )


async def test_ill_typed_trainjob_posted_to_the_running_webhook_server(trainer: Any) -> None:
    """The API server validates the schema before a validating webhook, so send it directly."""
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "bad", "namespace": trainer.namespace},
        "spec": {"runtimeRef": {"name": "x"}, "trainer": {"numNodes": "2"}},
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "operation": "CREATE",
            "object": obj,
        },
    }
    ctx = ssl.create_default_context(cadata=trainer.webhook_ca.decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
        session.post(
            trainer.webhook_url + "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
            data=json.dumps(review),
            headers={"Content-Type": "application/json"},
        ) as r,
    ):
        response = (await r.json())["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"] == (
        "json: cannot unmarshal string into Go struct field Trainer.spec.trainer.numNodes of type int32"
    )


async def test_unsupported_runtime_kind_is_forbidden(trainer: Any) -> None:
    tj = trainjob("train-job", trainer.namespace, "x")
    tj["spec"]["runtimeRef"] = {"name": "x", "apiGroup": "example.com", "kind": "Foo"}
    with pytest.raises(Forbidden) as denied:
        await trainer.client.create(tj)
    assert str(denied.value) == TJ_DENIED + "unsupported runtime: Foo.example.com"


def _drop_container(job_name: str) -> Any:
    def change(tr: Json) -> None:
        for job in tr["spec"]["template"]["spec"]["replicatedJobs"]:
            if job["name"] == job_name:
                pod = job["template"]["spec"]["template"]["spec"]
                pod["containers"] = [{"name": "other", "image": "other"}]

    return change


async def test_model_initializer_needs_its_container(trainer: Any, runtimes: str) -> None:
    # spec: trainer B7
    await _update_tr(trainer, _drop_container("model-initializer"))
    tj = trainjob(
        "train-job",
        trainer.namespace,
        "training-runtime",
        initializer={"model": {"storageUri": "hf://trainjob-model"}},
    )
    with pytest.raises(
        Forbidden, match="must have container with name - model-initializer in the model-initializer job"
    ):
        await trainer.client.create(tj)


async def test_dataset_initializer_needs_its_container(trainer: Any, runtimes: str) -> None:
    # spec: trainer B8
    await _update_tr(trainer, _drop_container("dataset-initializer"))
    tj = trainjob(
        "train-job", trainer.namespace, "training-runtime", initializer={"dataset": {"storageUri": "hf://d"}}
    )
    with pytest.raises(
        Forbidden, match="must have container with name - dataset-initializer in the dataset-initializer job"
    ):
        await trainer.client.create(tj)


async def test_dataset_initializer_on_unlabelled_cluster_runtime_is_admitted(
    trainer: Any, runtimes: str
) -> None:
    # spec: trainer B9
    tj = trainjob(
        "train-job",
        trainer.namespace,
        runtimes,
        kind="ClusterTrainingRuntime",
        initializer={"dataset": {"storageUri": "hf://d"}},
    )
    await trainer.client.create(tj)


def _set_ml_policy(policy: Json) -> Any:
    def change(tr: Json) -> None:
        tr["spec"]["mlPolicy"] = policy

    return change


async def test_mpi_rejects_invalid_num_proc_per_node(trainer: Any, runtimes: str) -> None:
    # spec: trainer B10
    await _update_tr(trainer, _set_ml_policy({"mpi": {}}))
    tj = trainjob("train-job", trainer.namespace, "training-runtime", trainer={"numProcPerNode": "invalid"})
    with pytest.raises(Forbidden):
        await trainer.client.create(tj)


async def test_torch_num_proc_per_node_and_reserved_env(trainer: Any, runtimes: str) -> None:
    # spec: trainer B11
    # spec: trainer B12
    # spec: trainer B13
    client, ns = trainer.client, trainer.namespace
    await _update_tr(trainer, _set_ml_policy({"torch": {}}))
    with pytest.raises(Forbidden):
        await client.create(
            trainjob("train-job", ns, "training-runtime", trainer={"numProcPerNode": "invalid"})
        )
    await client.create(trainjob("train-job", ns, "training-runtime", trainer={"numProcPerNode": "auto"}))
    reserved = {"numProcPerNode": "auto", "env": [{"name": "PET_NODE_RANK", "value": "1"}]}
    with pytest.raises(Forbidden):
        await client.create(trainjob("train-job-2", ns, "training-runtime", trainer=reserved))


async def test_runtime_webhooks_check_ancestor_jobs(trainer: Any) -> None:
    # TrainingRuntime create is validated (upstream text); its updates are not.
    client, ns = trainer.client, trainer.namespace
    jobs = wrapper_rjobs()
    jobs[0]["replicas"] = 2
    with pytest.raises(Forbidden) as denied:
        await client.create(runtime("bad", ns, rjobs=jobs))
    assert str(denied.value) == (
        'admission webhook "validator.trainingruntime.trainer.kubeflow.org" denied the request: '
        "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1"
    )
    # ClusterTrainingRuntime updates are validated too.
    name = f"ctr-{ns}"
    await client.create(runtime(name, None, rjobs=[rjob("node")]))
    try:
        current: Json = await client.get(CTR, name)
        current["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "containers"
        ] = [{"name": "test", "image": "test"}]
        with pytest.raises(Forbidden, match="must contain the required container for the ancestor: trainer"):
            await client.update(current)
    finally:
        await client.delete_by_name(CTR, name)
