"""The full local cluster runs workloads: Jobs create Pods, KWOK completes them, GC cleans up."""

from __future__ import annotations

from kubernetes_asyncio import client

from manager.testing import eventually


def three_completion_job(name: str) -> client.V1Job:
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(
            completions=3,
            parallelism=3,
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="busybox", command=["true"])],
                )
            ),
        ),
    )


async def test_job_runs_to_complete_and_gc_deletes_its_pods(
    full_kube: client.ApiClient, full_namespace: str
) -> None:
    batch, core = client.BatchV1Api(full_kube), client.CoreV1Api(full_kube)
    await batch.create_namespaced_job(full_namespace, three_completion_job("pi"))

    async def pods_of_job() -> list[client.V1Pod]:
        pods = await core.list_namespaced_pod(full_namespace, label_selector="job-name=pi")
        return list(pods.items)

    async def job_complete() -> None:
        job = await batch.read_namespaced_job("pi", full_namespace)
        conditions = {c.type: c.status for c in (job.status.conditions or [])}
        assert conditions.get("Complete") == "True", f"job status: {job.status}"
        assert job.status.succeeded == 3

    await eventually(job_complete, timeout=120, message="Job pi never reached Complete")
    pods = await pods_of_job()
    assert len(pods) == 3
    assert all(p.status.phase == "Succeeded" for p in pods)
    assert all(p.spec.node_name and p.spec.node_name.startswith("kwok-node-") for p in pods)

    await batch.delete_namespaced_job("pi", full_namespace, propagation_policy="Background")

    async def pods_gone() -> None:
        assert await pods_of_job() == []

    await eventually(pods_gone, timeout=90, message="the garbage collector never deleted the Job's pods")
