"""Plain JobSets admitted by Kueue's JobSet integration, run by this manager, at each API level
(Kueue v0.15.0 at v2.1, v0.17.0 at v2.3: both write into a suspended JobSet the same way).

Kueue's mutating webhook suspends a JobSet that names a LocalQueue; on admission Kueue writes the
flavor's node selector and tolerations into every replicated job's pod template and unsuspends
it in one update, which this manager's JobSet webhook allows only because the old JobSet is
suspended; this manager's JobSet controller then carries the templates into its suspended Jobs
before resuming them, so every pod lands on the flavor's nodes. Deactivating the Workload (full
suite) suspends the JobSet and restores its templates; reactivating it runs it again.
"""

from __future__ import annotations

from kueuee2e import (
    KQ_API,
    POOL,
    POOL_LABEL,
    POOL_TOLERATION,
    WAIT,
    Api,
    Json,
    Stack,
    Watch,
    assert_no_reconciler_errors,
    delete_queue_objects,
    full_only,
    is_true,
    log_size,
    queue_objects,
)

from manager.testing import eventually
from trainer.conformance import kueue as kq


def _jobset(name: str, namespace: str, *, replicas: int, cpu: str) -> Json:
    pod = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}},
        ],
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {kq.QUEUE_LABEL: "lq"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {"spec": pod},
                        }
                    },
                }
            ]
        },
    }


def _template(js: Json) -> Json:
    spec: Json = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return spec


def _placed(pod_spec: Json) -> bool:
    return (pod_spec.get("nodeSelector") or {}).get(POOL_LABEL) == POOL and POOL_TOLERATION in (
        pod_spec.get("tolerations") or []
    )


async def assert_running(api: Api, name: str, replicas: int, flavor: str) -> None:
    js = await api.must_get(api.jobset(name))
    assert js["spec"].get("suspend") is False, js["spec"].get("suspend")
    assert _placed(_template(js)), _template(js)
    wl = await api.workload_of("JobSet", name)
    assert is_true(wl, "Admitted"), wl.get("status")
    assert [a["flavors"] for a in wl["status"]["admission"]["podSetAssignments"]] == [{"cpu": flavor}]
    jobs = await api.items(
        f"/apis/batch/v1/namespaces/{api.ns}/jobs", f"jobset.sigs.k8s.io/jobset-name={name}"
    )
    assert len(jobs) == replicas, [j["metadata"]["name"] for j in jobs]
    for job in jobs:
        assert job["spec"].get("suspend") is False, job["spec"].get("suspend")
        assert _placed(job["spec"]["template"]["spec"]), job["spec"]["template"]["spec"]
    pods = [p for p in await api.jobset_pods(name) if not p["metadata"].get("deletionTimestamp")]
    assert len(pods) == replicas, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert (pod["spec"].get("nodeName") or "").startswith("pool-node-"), pod["spec"].get("nodeName")
        assert pod["status"].get("phase") == "Running", pod["status"].get("phase")
    assert is_true(wl, "PodsReady"), wl.get("status")


def assert_never_ran_unplaced(watch: Watch) -> None:
    """No version of the JobSet was unsuspended without the flavor's placement."""
    for kind, obj in watch.events:
        if kind in ("ADDED", "MODIFIED") and obj["spec"].get("suspend") is False:
            assert _placed(_template(obj)), (obj["metadata"]["resourceVersion"], _template(obj))


async def test_jobset_admitted_with_the_flavors_placement(kueue_stack: Stack, api: Api) -> None:
    since = log_size(kueue_stack.manager.log)
    names = await queue_objects(api, api.ns)
    try:
        created = await api.create(api.jobset(), _jobset("js", api.ns, replicas=2, cpu="1"))
        # Kueue's webhook suspended it at creation; nothing of the flavor is in it yet.
        assert created["spec"].get("suspend") is True, created["spec"]
        assert POOL_LABEL not in (_template(created).get("nodeSelector") or {}), _template(created)
        async with Watch(api.env, api.jobset(), created["metadata"]["resourceVersion"]) as watch:
            await eventually(
                lambda: assert_running(api, "js", 2, names["flavor"]),
                timeout=WAIT,
                message="JobSet js never ran as admitted by Kueue",
            )
        assert_never_ran_unplaced(watch)
        assert any(obj["spec"].get("suspend") is False for _, obj in watch.events), watch.events
        assert_no_reconciler_errors(kueue_stack, api.ns, since)
    finally:
        await api.delete(api.jobset("js"))
        await delete_queue_objects(api, names)


async def assert_deactivated(api: Api, name: str) -> None:
    js = await api.must_get(api.jobset(name))
    assert js["spec"].get("suspend") is True, js["spec"].get("suspend")
    assert not _placed(_template(js)), _template(js)
    assert await api.jobset_pods(name) == []
    wl = await api.workload_of("JobSet", name)
    assert not is_true(wl, "Admitted"), wl.get("status")


@full_only
async def test_jobset_deactivated_and_reactivated(kueue_stack: Stack, api: Api) -> None:
    """Workload ``spec.active: false`` suspends the JobSet, restores its templates and removes its
    pods; ``active: true`` admits it again and its pods run on the flavor's nodes."""
    since = log_size(kueue_stack.manager.log)
    names = await queue_objects(api, api.ns)
    try:
        await api.create(api.jobset(), _jobset("js", api.ns, replicas=2, cpu="1"))
        await eventually(
            lambda: assert_running(api, "js", 2, names["flavor"]), timeout=WAIT, message="js never ran"
        )
        wl = await api.workload_of("JobSet", "js")
        path = f"{KQ_API}/namespaces/{api.ns}/workloads/{wl['metadata']['name']}"
        await api.patch(path, {"spec": {"active": False}})
        await eventually(
            lambda: assert_deactivated(api, "js"), timeout=WAIT, message="js was never deactivated"
        )
        await api.patch(path, {"spec": {"active": True}})
        await eventually(
            lambda: assert_running(api, "js", 2, names["flavor"]), timeout=WAIT, message="js never ran again"
        )
        assert_no_reconciler_errors(kueue_stack, api.ns, since)
    finally:
        await api.delete(api.jobset("js"))
        await delete_queue_objects(api, names)
