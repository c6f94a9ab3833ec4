"""Ill-typed objects POSTed to the webhook server: every webhook we serve answers as controller-runtime's
decoder does (allowed=false, code 400, encoding/json's message), never with a Python exception.

Mutating webhooks run before the API server's schema validation, so they do receive such objects;
the texts below are the Go managers' answers to the same AdmissionReviews.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from manager.envtest.certs import TinyCA
from manager.testing.fake import FakeClient
from manager.webhook import INTERNAL_ERROR_MESSAGE, WebhookServer, defaulting_handler
from webhooks import jobset as jobset_webhooks
from webhooks import pod as pod_webhooks
from webhooks import register_trainer

TRAINER = "trainer.kubeflow.org/v1alpha1"
KINDS = {
    "/mutate-jobset-x-k8s-io-v1alpha2-jobset": ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
    "/validate-jobset-x-k8s-io-v1alpha2-jobset": ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
    "/mutate--v1-pod": ("", "v1", "Pod"),
    "/validate--v1-pod": ("", "v1", "Pod"),
    "/validate-trainer-kubeflow-org-v1alpha1-trainjob": ("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
    "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime": (
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainingRuntime",
    ),
    "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime": (
        "trainer.kubeflow.org",
        "v1alpha1",
        "ClusterTrainingRuntime",
    ),
}


class Broken:
    async def default(self, obj: dict[str, Any]) -> None:
        raise KeyError("secret internal detail")


class Served:
    def __init__(self, port: int, ca: TinyCA) -> None:
        self.url = f"https://127.0.0.1:{port}"
        self.ca = ca

    async def review(self, path: str, obj: Any, operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
        group, version, kind = KINDS.get(path, ("", "v1", "ConfigMap"))
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
                "operation": operation,
                "object": obj,
                "oldObject": old,
            },
        }
        ctx = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
            session.post(
                self.url + path, data=json.dumps(body), headers={"Content-Type": "application/json"}
            ) as r,
        ):
            assert r.status == 200
            answer: dict[str, Any] = await r.json()
            return answer["response"]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    ca = TinyCA("decode-test-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    server.register(jobset_webhooks.MUTATE_PATH, jobset_webhooks.mutating_handler())
    server.register(jobset_webhooks.VALIDATE_PATH, jobset_webhooks.validation_handler())
    server.register(pod_webhooks.MUTATE_PATH, pod_webhooks.mutating_handler(FakeClient()))
    server.register(pod_webhooks.VALIDATE_PATH, pod_webhooks.validation_handler(FakeClient()))
    register_trainer(server, {})
    server.register("/mutate-broken", defaulting_handler(Broken()))
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    assert server.bound_port is not None
    try:
        yield Served(server.bound_port, ca)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def js(spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": spec,
    }


def pod(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def trainer_obj(kind: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": TRAINER, "kind": kind, "metadata": {"name": "t"}, "spec": spec}


JOBSET_PATHS = [jobset_webhooks.MUTATE_PATH, jobset_webhooks.VALIDATE_PATH]
POD_PATHS = [pod_webhooks.MUTATE_PATH, pod_webhooks.VALIDATE_PATH]

CASES: list[tuple[str, list[str], Any, str]] = [
    (
        "top level",
        JOBSET_PATHS,
        js("x"),
        "json: cannot unmarshal string into Go struct field JobSet.spec of type v1alpha2.JobSetSpec",
    ),
    (
        "list element",
        JOBSET_PATHS,
        js({"replicatedJobs": [{"name": 5}]}),
        "json: cannot unmarshal number into Go struct field ReplicatedJob.spec.replicatedJobs.name of type string",
    ),
    (
        "nested core type",
        JOBSET_PATHS,
        js(
            {
                "replicatedJobs": [
                    {
                        "name": "r",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {
                                        "containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]
                                    }
                                }
                            }
                        },
                    }
                ]
            }
        ),
        "json: cannot unmarshal string into Go struct field ContainerPort.spec.replicatedJobs.template.spec.template"
        ".spec.containers.ports.containerPort of type int32",
    ),
    (
        "pod spec",
        POD_PATHS,
        pod({"containers": [{"name": "c", "env": [{"name": "E", "value": 1}]}]}),
        "json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value of type string",
    ),
    (
        "pod quantity",
        POD_PATHS,
        pod({"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ),
    (
        "trainjob",
        ["/validate-trainer-kubeflow-org-v1alpha1-trainjob"],
        trainer_obj("TrainJob", {"runtimeRef": {"name": "r"}, "trainer": {"numNodes": "2"}}),
        "json: cannot unmarshal string into Go struct field Trainer.spec.trainer.numNodes of type int32",
    ),
    (
        "trainingruntime",
        ["/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"],
        trainer_obj("TrainingRuntime", {"template": {"spec": {"replicatedJobs": "x"}}}),
        "json: cannot unmarshal string into Go struct field JobSetSpec.spec.template.spec.replicatedJobs of type"
        " []v1alpha2.ReplicatedJob",
    ),
    (
        "clustertrainingruntime",
        ["/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"],
        trainer_obj("ClusterTrainingRuntime", {"mlPolicy": {"numNodes": True}}),
        "json: cannot unmarshal bool into Go struct field MLPolicy.spec.mlPolicy.numNodes of type int32",
    ),
]


@pytest.mark.parametrize(("paths", "obj", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_ill_typed_objects_are_answered_400_with_go_text(
    served: Served, paths: list[str], obj: Any, message: str
) -> None:
    for path in paths:
        response = await served.review(path, obj)
        assert response["allowed"] is False, path
        assert response["status"]["code"] == 400, path
        assert response["status"]["message"] == message, path
        assert "patch" not in response


async def test_update_decodes_the_new_object_first(served: Served) -> None:
    old, new = js({"replicatedJobs": [{"name": 1}]}), js({"suspend": "no"})
    response = await served.review(jobset_webhooks.VALIDATE_PATH, new, "UPDATE", old)
    assert response["status"] == {
        "code": 400,
        "message": "json: cannot unmarshal string into Go struct field JobSetSpec.spec.suspend of type bool",
        "status": "Failure",
    }
    response = await served.review(jobset_webhooks.VALIDATE_PATH, js({}), "UPDATE", old)
    assert response["status"]["message"].endswith("ReplicatedJob.spec.replicatedJobs.name of type string")


async def test_null_where_an_object_is_expected_is_zero_for_go(served: Served) -> None:
    response = await served.review(
        jobset_webhooks.MUTATE_PATH, js({"replicatedJobs": [{"name": "r", "template": None}]})
    )
    assert response["allowed"] is True
    response = await served.review(pod_webhooks.VALIDATE_PATH, pod({"containers": None, "affinity": None}))
    assert response["allowed"] is True


async def test_no_object_and_unknown_operation(served: Served) -> None:
    response = await served.review(jobset_webhooks.MUTATE_PATH, None)
    assert (response["allowed"], response["status"]["code"]) == (False, 400)
    assert response["status"]["message"] == "there is no content to decode"
    response = await served.review(jobset_webhooks.VALIDATE_PATH, js({}), "PATCH")
    assert response["status"]["message"] == 'unknown operation "PATCH"'


async def test_a_handler_bug_is_a_generic_500_and_logged(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = await served.review("/mutate-broken", {"apiVersion": "v1", "kind": "ConfigMap"})
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert response["status"]["message"] == INTERNAL_ERROR_MESSAGE
    assert "secret internal detail" not in json.dumps(response)
    assert any(r.exc_info and "secret internal detail" in str(r.exc_info[1]) for r in caplog.records)
