"""Level v2.3's runtime snapshot against a kube-apiserver with the v2.3 CRDs
(docs/behaviour/trainer.md §12.10), with ``python -m trainer --api-level=v2.3`` running: the
first reconcile of a TrainJob server-side applies ConfigMap ``<trainjob>-runtime-snapshot``
(owned by the TrainJob, the runtime as YAML in ``runtime``); an edit of the runtime after that
does not reach the TrainJob's JobSet; a snapshot owned by another object fails the reconcile
with Trainer v2.3.0's words.

The control plane and the manager are those of ``test_trainer_level_v2_3_runtimes_live.py``'s
fixtures (this module starts its own instance of them).
"""

from __future__ import annotations

from typing import Any

import test_trainer_level_v2_3_runtimes_live as base
import yaml
from trainer_process import RunningManager

from manager.client import Client, NotFound
from manager.client.patch import Patch
from manager.envtest import Environment
from manager.meta.gvk import CONFIGMAP
from manager.testing import eventually
from trainer.runtime.objects import JOBSET_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

Json = dict[str, Any]

# the fixtures of the finalizer tests' module, instantiated again for this one
env_v2_3 = base.env_v2_3
api = base.api
namespace = base.namespace
manager = base.manager
train_job = base.train_job
training_runtime = base.training_runtime


def images(jobset: Json) -> list[str]:
    return [
        c["image"]
        for job in jobset["spec"]["replicatedJobs"]
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
    ]


async def test_the_snapshot_is_applied_owned_by_the_trainjob_and_an_edited_runtime_does_not_reach_it(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    await api.create(training_runtime(namespace, "rt"))
    tj = await api.create(train_job(namespace, "snap", "rt"))
    cm = await eventually(
        lambda: api.get(CONFIGMAP, "snap-runtime-snapshot", namespace),
        retry_on=(NotFound,),
        message="no runtime snapshot ConfigMap",
    )
    assert cm["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "snap",
            "uid": tj["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert [(f["manager"], f["operation"]) for f in cm["metadata"]["managedFields"]] == [("trainer", "Apply")]
    assert list(cm["data"]) == ["runtime"]
    stored = await api.get(TRAINING_RUNTIME_GVK, "rt", namespace)
    doc = yaml.safe_load(cm["data"]["runtime"])
    assert (doc["apiVersion"], doc["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")
    assert doc["metadata"]["name"] == "rt" and doc["metadata"]["uid"] == stored["metadata"]["uid"]
    assert doc["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    jobset = await eventually(
        lambda: api.get(JOBSET_GVK, "snap", namespace), retry_on=(NotFound,), message="no JobSet"
    )
    assert images(jobset) == ["busybox"]

    # the runtime is edited, then the TrainJob resumed: its JobSet follows the TrainJob, not the edit
    edited = await api.get(TRAINING_RUNTIME_GVK, "rt", namespace)
    edited["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["image"] = "busybox:edited"
    await api.update(edited)
    await api.patch(await api.get(TRAINJOB_GVK, "snap", namespace), Patch.merge({"spec": {"suspend": False}}))

    async def resumed() -> Json:
        current: Json = await api.get(JOBSET_GVK, "snap", namespace)
        assert current["spec"].get("suspend") is False, current["spec"].get("suspend")
        return current

    jobset = await eventually(resumed, retry_on=(AssertionError,), message="the JobSet was not resumed")
    assert images(jobset) == ["busybox"]
    again = await api.get(CONFIGMAP, "snap-runtime-snapshot", namespace)
    assert again["data"] == cm["data"]

    # a TrainJob created after the edit snapshots the edited runtime
    await api.create(train_job(namespace, "later", "rt"))
    later = await eventually(
        lambda: api.get(JOBSET_GVK, "later", namespace), retry_on=(NotFound,), message="no JobSet"
    )
    assert images(later) == ["busybox:edited"]


async def test_a_snapshot_owned_by_another_object_fails_the_reconcile(
    api: Client, env_v2_3: Environment, namespace: str, manager: RunningManager
) -> None:
    await api.create(training_runtime(namespace, "rt"))
    await api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "foreign-runtime-snapshot",
                "namespace": namespace,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "someone",
                        "uid": "00000000-0000-0000-0000-000000000001",
                        "controller": True,
                    }
                ],
            },
            "data": {"runtime": "kind: TrainingRuntime\n"},
        }
    )
    await api.create(train_job(namespace, "foreign", "rt"))

    async def reported() -> Json:
        code, answer = await env_v2_3.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        assert code == 200, answer
        events = [e for e in answer["items"] if e["regarding"].get("name") == "foreign"]
        assert events, "no event yet"
        return dict(events[0])

    event = await eventually(reported, message="the failed reconcile was not reported")
    assert event["reason"] == "TrainJobResourcesCreationFailed"
    assert event["note"] == (
        "TrainJob resources reconciliation failed: unable to get runtime snapshot: invalid runtime "
        "snapshot: a snapshot configmap exists but is owned by another object"
    ), event["note"]
    try:
        await api.get(JOBSET_GVK, "foreign", namespace)
    except NotFound:
        pass
    else:
        raise AssertionError("a JobSet was built despite the foreign snapshot")
    cm = await api.get(CONFIGMAP, "foreign-runtime-snapshot", namespace)
    assert cm["data"] == {"runtime": "kind: TrainingRuntime\n"}
