"""Level v2.3's Flux plugin against a kube-apiserver with the v2.3 CRDs (docs/behaviour/trainer.md
§12.11), with ``python -m trainer --api-level=v2.3`` running: a TrainJob on a runtime with
``mlPolicy.flux`` gets ConfigMap ``<trainjob>-flux-entrypoint`` and Secret ``<trainjob>-flux-curve``
(server-side applied by field owner ``trainer``, controlled by the TrainJob, the certificate
derived from its uid) and a JobSet whose node pods run the installer init container and the
wrapped command; a deleted Secret comes back the same (the owned-Secret watch); a TrainJob
without ``numNodes`` fails its reconcile with the field named.

The control plane and the manager are those of ``test_trainer_level_v2_3_runtimes_live.py``'s
fixtures (this module starts its own instance of them).
"""

from __future__ import annotations

import base64
from typing import Any

import test_trainer_level_v2_3_runtimes_live as base
from trainer_process import RunningManager

from manager.client import Client, NotFound
from manager.envtest import Environment
from manager.meta.gvk import CONFIGMAP, SECRET
from manager.testing import eventually
from trainer.runtime.objects import JOBSET_GVK
from trainer.runtime.plugins.flux import curve_certificate

Json = dict[str, Any]

env_v2_3 = base.env_v2_3
api = base.api
namespace = base.namespace
manager = base.manager


def flux_runtime(namespace: str) -> Json:
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "node", "image": "ubuntu:jammy", "command": ["hostname"]}]
                    }
                }
            },
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "flux", "namespace": namespace},
        # numProcPerNode left out: the CRD defaults it to 1
        "spec": {"mlPolicy": {"numNodes": 1, "flux": {}}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


def flux_job(namespace: str, name: str, **trainer: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": "flux", "kind": "TrainingRuntime"}, "trainer": trainer},
    }


def owned_by(obj: Json, trainjob: Json) -> None:
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": trainjob["metadata"]["name"],
            "uid": trainjob["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert [(f["manager"], f["operation"]) for f in obj["metadata"]["managedFields"]] == [
        ("trainer", "Apply")
    ]


async def test_a_flux_trainjob_gets_its_configmap_secret_and_wrapped_node_pods(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    await api.create(flux_runtime(namespace))
    tj = await api.create(flux_job(namespace, "lmp", numNodes=2, args=["-in", "in.hns"]))

    cm = await eventually(
        lambda: api.get(CONFIGMAP, "lmp-flux-entrypoint", namespace),
        retry_on=(NotFound,),
        message="no entrypoint ConfigMap",
    )
    owned_by(cm, tj)
    assert sorted(cm["data"]) == ["entrypoint.sh", "init.sh"]
    assert 'hosts="lmp-node-0-[0-1]"' in cm["data"]["init.sh"]
    assert f'default_connect = "tcp://%h.lmp.{namespace}.svc.cluster.local:%p"' in cm["data"]["init.sh"]
    # the CRD's default numProcPerNode (1): cores 0, two nodes, two tasks
    assert "flux R encode --hosts=${hosts} --cores=0 > /tmp/R" in cm["data"]["entrypoint.sh"]
    assert 'flags="-N 2 -n 2  "' in cm["data"]["entrypoint.sh"]

    secret = await api.get(SECRET, "lmp-flux-curve", namespace)
    owned_by(secret, tj)
    assert secret["type"] == "Opaque"
    cert = base64.b64decode(secret["data"]["curve.cert"]).decode()
    assert cert == curve_certificate("lmp", tj["metadata"]["uid"])

    jobset = await eventually(
        lambda: api.get(JOBSET_GVK, "lmp", namespace), retry_on=(NotFound,), message="no JobSet"
    )
    (job,) = jobset["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]["spec"]
    assert [(c["name"], c["image"], c["command"]) for c in pod["initContainers"]] == [
        (
            "flux-installer",
            "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
            ["/bin/bash", "/etc/flux-config/init.sh"],
        )
    ]
    (node,) = pod["containers"]
    assert node["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "hostname -in in.hns"]
    assert "args" not in node
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["flux-curve"]["secret"] == {"secretName": "lmp-flux-curve", "defaultMode": 0o400}
    assert volumes["lmp-flux-entrypoint"]["configMap"] == {
        "name": "lmp-flux-entrypoint",
        "defaultMode": 0o755,
    }

    # the Secret is owned and watched: deleted, it is applied again with the same key
    await api.delete(secret)

    async def reapplied() -> Json:
        again: Json = await api.get(SECRET, "lmp-flux-curve", namespace)
        assert again["metadata"]["uid"] != secret["metadata"]["uid"], "still the deleted Secret"
        return again

    again = await eventually(reapplied, retry_on=(NotFound,), message="the Secret was not applied again")
    assert again["data"] == secret["data"]


async def test_a_flux_trainjob_without_num_nodes_fails_its_reconcile_naming_the_field(
    api: Client, env_v2_3: Environment, namespace: str, manager: RunningManager
) -> None:
    await api.create(flux_runtime(namespace))
    await api.create(flux_job(namespace, "no-nodes", command=["hostname"]))

    async def reported() -> Json:
        code, answer = await env_v2_3.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        assert code == 200, answer
        events = [e for e in answer["items"] if e["regarding"].get("name") == "no-nodes"]
        assert events, "no event yet"
        return dict(events[0])

    event = await eventually(reported, message="the failed reconcile was not reported")
    assert (event["type"], event["reason"]) == ("Warning", "TrainJobResourcesCreationFailed")
    assert event["note"] == (
        "TrainJob resources reconciliation failed: "
        "spec.trainer.numNodes: Required value: a TrainJob on a Flux runtime needs numNodes"
    )
    for gvk, name in (
        (CONFIGMAP, "no-nodes-flux-entrypoint"),
        (SECRET, "no-nodes-flux-curve"),
        (JOBSET_GVK, "no-nodes"),
    ):
        try:
            await api.get(gvk, name, namespace)
        except NotFound:
            continue
        raise AssertionError(f"{gvk.kind} {name} was applied for a TrainJob that cannot be built")
