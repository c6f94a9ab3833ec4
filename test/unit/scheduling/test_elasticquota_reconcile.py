"""ElasticQuota reconciler against a fake API: upstream's unit cases (§7.2) and derived ones (§7.6)."""

from __future__ import annotations

from typing import Any

import pytest
from sched_fixtures import container, eq, eq_reconciler, events, fake_api, pod, res, set_pod_phase

from manager.client.errors import NotFound
from manager.controller.event import CreateEvent, DeleteEvent, UpdateEvent
from manager.controller.predicate import Predicate
from manager.controller.reconcile import Request, TerminalError
from manager.meta.quantity import Quantity
from manager.testing.fake import FakeClient
from trainer.controllers.elasticquota import (
    ELASTICQUOTA,
    POD,
    RECOMPUTE_SPACING,
    ElasticQuotaReconciler,
    compute_used,
    pod_may_change_used,
    pod_request,
    same_resources,
)

Object = dict[str, Any]


def numeric(used: Object | None) -> dict[str, Quantity]:
    return {k: Quantity(v) for k, v in (used or {}).items()}


def q(**values: Any) -> dict[str, Quantity]:
    out = {}
    for key, value in values.items():
        name = {"cpu": "cpu", "mem": "memory", "gpu": "nvidia.com/gpu"}.get(key, key.replace("_", "-"))
        out[name] = Quantity(str(value))
    return out


async def used_of(client: FakeClient, namespace: str, name: str) -> dict[str, Quantity]:
    obj = await client.get(ELASTICQUOTA, name, namespace)
    return numeric((obj.get("status") or {}).get("used"))


async def submit(client: FakeClient, pod_obj: Object) -> None:
    """Upstream's harness: create, or update an existing name (spec replaced, stored phase kept);
    a phase in a newly created object is then written through /status, as the tests set it."""
    meta = pod_obj["metadata"]
    try:
        await client.get(POD, meta["name"], meta["namespace"])
    except NotFound:
        await client.create(pod_obj)
        phase = (pod_obj.get("status") or {}).get("phase")
        if phase:
            await set_pod_phase(client, meta["name"], phase, meta["namespace"])
    else:
        await client.update(pod_obj)


async def run_case(quotas: list[Object], pods: list[Object]) -> FakeClient:
    client = fake_api(*quotas)
    for p in pods:
        await submit(client, p)
    reconciler = eq_reconciler(client)
    for p in pods:
        await reconciler.reconcile(Request.for_object(p))
    for quota in quotas:
        await reconciler.reconcile(Request.for_object(quota))
    return client


MIN35 = res(cpu=3, mem=5)
MAX515 = res(cpu=5, mem=15)


async def test_no_init_containers() -> None:
    # spec: scheduling 14
    client = await run_case(
        [eq("t1-eq1", "t1-ns1", min=MIN35, max=res(cpu=5, mem=15, gpu=1))],
        [
            pod(
                "pod1",
                "t1-ns1",
                group=None,
                phase="Running",
                containers=[container(res(cpu=1, mem=2, gpu=1))],
            ),
            pod(
                "pod2",
                "t1-ns1",
                group=None,
                phase="Pending",
                containers=[container(res(cpu=1, mem=2, gpu=0))],
            ),
        ],
    )
    assert await used_of(client, "t1-ns1", "t1-eq1") == q(cpu=1, mem=2, gpu=1)


INITS = [container(res(cpu=2, mem=1)), container(res(cpu=2, mem=3))]


async def test_init_containers() -> None:
    # spec: scheduling 15
    client = await run_case(
        [eq("t2-eq1", "t2-ns1", min=MIN35, max=MAX515)],
        [
            pod(
                "pod1",
                "t2-ns1",
                group=None,
                phase="Running",
                containers=[container(res(cpu=1, mem=2)), container(res(cpu=1, mem=2))],
            ),
            pod(
                "pod2",
                "t2-ns1",
                group=None,
                phase="Running",
                init=INITS,
                containers=[container(res(cpu=2, mem=1)), container(res(cpu=1, mem=1))],
            ),
        ],
    )
    assert await used_of(client, "t2-ns1", "t2-eq1") == q(cpu=5, mem=7)


async def test_pod_spec_updated_while_running() -> None:
    # spec: scheduling 16
    client = await run_case(
        [eq("t3-eq1", "t3-ns1", min=MIN35, max=MAX515), eq("t3-eq2", "t3-ns2", min=MIN35, max=MAX515)],
        [
            pod(
                "pod1",
                "t3-ns1",
                group=None,
                phase="Running",
                containers=[container(res(cpu=1, mem=2, gpu=1)), container(res(cpu=1, mem=2))],
            ),
            pod(
                "pod1",
                "t3-ns1",
                group=None,
                phase="Pending",
                init=INITS,
                containers=[container(res(cpu=2, mem=1)), container(res(cpu=1, mem=1))],
            ),
            pod(
                "pod2",
                "t3-ns2",
                group=None,
                phase="Running",
                init=INITS,
                containers=[container(res(cpu=3, mem=1)), container(res(cpu=1, mem=1))],
            ),
        ],
    )
    assert await used_of(client, "t3-ns1", "t3-eq1") == q(cpu=3, mem=3), "no GPU key left"
    assert await used_of(client, "t3-ns2", "t3-eq2") == q(cpu=4, mem=3)


async def test_same_min_max_keys_no_pods() -> None:
    # spec: scheduling 17
    client = await run_case([eq("t4-eq1", "t4-ns1", min=MIN35, max=MAX515)], [])
    assert await used_of(client, "t4-ns1", "t4-eq1") == q(cpu=0, mem=0)


async def test_different_min_max_keys_no_pods() -> None:
    # spec: scheduling 18
    client = await run_case([eq("t5-eq1", "t5-ns1", min=res(cpu=3, mem=5, gpu=2), max=MAX515)], [])
    assert await used_of(client, "t5-ns1", "t5-eq1") == q(cpu=0, mem=0, gpu=0)


async def test_pod_in_namespace_without_quota() -> None:
    # spec: scheduling 19
    quotas = [
        eq("t6-eq1", "t6-ns1", min=res(cpu=3, mem=5, gpu=2), max=res(cpu=50, mem=15)),
        eq("t6-eq2", "t6-ns2", min=res(cpu=3, mem=5, gpu=2), max=res(cpu=50, mem=15)),
    ]
    running = pod(
        "pod1",
        "t6-ns3",
        group=None,
        phase="Running",
        containers=[container(res(cpu=1, mem=2, gpu=1)), container(res(cpu=1, mem=2))],
    )
    client = fake_api(*quotas)
    await submit(client, running)
    reconciler = eq_reconciler(client)
    await reconciler.reconcile(Request.for_object(running))
    assert client.requests["status.patch"] == 1, (
        "only the pod's own phase write: the pod's reconcile is a no-op"
    )
    for quota in quotas:
        await reconciler.reconcile(Request.for_object(quota))
    assert await used_of(client, "t6-ns1", "t6-eq1") == q(cpu=0, mem=0, gpu=0)
    assert await used_of(client, "t6-ns2", "t6-eq2") == q(cpu=0, mem=0, gpu=0)


# -- derived scenarios -------------------------------------------------------------------------


async def test_no_quota_no_writes_no_events() -> None:
    # spec: scheduling 65
    client = fake_api(pod("p", "ns", phase="Running", containers=[container(res(cpu=1))]))
    await eq_reconciler(client).reconcile(Request("ns", "p"))
    assert client.writes == 0


async def test_resource_outside_min_max_is_reported() -> None:
    # spec: scheduling 66
    client = fake_api(
        eq("q", "ns", min=res(cpu=1), max=res(cpu=2)),
        pod("p", "ns", phase="Running", containers=[container(res(cpu=1, ephemeral_storage="1Gi"))]),
    )
    await eq_reconciler(client).reconcile(Request("ns", "q"))
    assert await used_of(client, "ns", "q") == q(cpu=1, ephemeral_storage="1Gi")


async def test_pod_overhead_is_counted() -> None:
    # spec: scheduling 67
    # Fixed upstream bug (docs/divergences.md S-5): upstream discards the overhead sum and would
    # report cpu 1; the pod really occupies 1250m, which is what we report.
    client = fake_api(
        eq("q", "ns", min=res(cpu=4)),
        pod("p", "ns", phase="Running", containers=[container(res(cpu=1))], overhead={"cpu": "250m"}),
    )
    await eq_reconciler(client).reconcile(Request("ns", "q"))
    assert await used_of(client, "ns", "q") == q(cpu="1250m")


async def test_sidecar_init_container_is_maxed_not_summed() -> None:
    # spec: scheduling 68
    client = fake_api(
        eq("q", "ns", max=res(cpu=4)),
        pod(
            "p",
            "ns",
            phase="Running",
            init=[container(res(cpu=1), restartPolicy="Always")],
            containers=[container(res(cpu=1))],
        ),
    )
    await eq_reconciler(client).reconcile(Request("ns", "q"))
    assert await used_of(client, "ns", "q") == q(cpu=1)


async def test_init_container_only_resource() -> None:
    # spec: scheduling 69
    client = fake_api(
        eq("q", "ns", max=res(cpu=4)),
        pod("p", "ns", phase="Running", init=[container(res(gpu=1))], containers=[container(res(cpu=1))]),
    )
    await eq_reconciler(client).reconcile(Request("ns", "q"))
    assert await used_of(client, "ns", "q") == q(cpu=1, gpu=1)


async def test_numerically_equal_used_is_not_rewritten() -> None:
    # spec: scheduling 70
    client = fake_api(
        eq("q", "ns", max=res(cpu=4), used={"cpu": "1000m"}),
        pod("p", "ns", phase="Running", containers=[container(res(cpu=1))]),
    )
    await eq_reconciler(client).reconcile(Request("ns", "p"))
    assert client.writes == 0, "no patch and no Synced event"


async def test_vanished_key_is_deleted_and_quota_keys_fall_to_zero() -> None:
    # spec: scheduling 71
    gpu_pod = pod("p", "ns", phase="Running", containers=[container(res(cpu=2, gpu=1))])
    client = fake_api(eq("q", "ns", min=res(cpu=1), max=res(cpu=4)), gpu_pod)
    reconciler = eq_reconciler(client)
    await reconciler.reconcile(Request("ns", "q"))
    assert await used_of(client, "ns", "q") == q(cpu=2, gpu=1)
    await set_pod_phase(client, "p", "Succeeded", "ns")
    await reconciler.reconcile(Request("ns", "p"))
    stored = (await client.get(ELASTICQUOTA, "q", "ns"))["status"]["used"]
    assert stored == {"cpu": "0"}, "GPU key removed by a merge-patch null, cpu back to 0"


@pytest.mark.parametrize("phase", ["Pending", "Unknown", "Succeeded", "Failed", None])
async def test_only_running_pods_count(phase: str | None) -> None:
    # spec: scheduling 72
    not_running = pod("p", "ns", phase=phase, containers=[container(res(cpu=1))])
    not_running["spec"]["nodeName"] = "node-1"  # bound already
    client = fake_api(eq("q", "ns", max=res(cpu=4)), not_running)
    await eq_reconciler(client).reconcile(Request("ns", "q"))
    assert await used_of(client, "ns", "q") == q(cpu=0)


async def test_synced_event_names_the_request() -> None:
    # spec: scheduling 73
    client = fake_api(
        eq("q", "ns", max=res(cpu=4)), pod("p1", "ns", phase="Running", containers=[container(res(cpu=1))])
    )
    await eq_reconciler(client).reconcile(Request("ns", "p1"))
    (event,) = await events(client)
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal",
        "Synced",
        "Elastic Quota ns/p1 synced successfully",
    )
    assert event["involvedObject"]["kind"] == "ElasticQuota"
    assert event["involvedObject"]["name"] == "q"
    assert event["source"]["component"] == "ElasticQuotaController"


async def test_two_quotas_in_a_namespace_first_by_name_is_updated() -> None:
    # spec: scheduling 74
    # Fixed nondeterminism (docs/divergences.md S-6): upstream updates whichever the cache lists first.
    client = fake_api(
        eq("zz", "ns", max=res(cpu=4)),
        eq("aa", "ns", max=res(cpu=4)),
        pod("p", "ns", phase="Running", containers=[container(res(cpu=1))]),
    )
    reconciler = eq_reconciler(client)
    for _ in range(2):
        await reconciler.reconcile(Request("ns", "p"))
    assert await used_of(client, "ns", "aa") == q(cpu=1)
    assert await used_of(client, "ns", "zz") == {}
    assert client.requests["status.patch"] == 1, "the second reconcile finds aa up to date"


# -- pure arithmetic and the event filter ------------------------------------------------------


def test_pod_request_arithmetic_keeps_go_formats() -> None:
    req = pod_request(
        pod(
            "p",
            containers=[container(res(cpu="500m", mem="1Gi")), container(res(cpu="750m", mem="512Mi"))],
            init=[container(res(cpu="2", mem="1Mi"))],
        )
    )
    assert {k: str(v) for k, v in req.items()} == {"cpu": "2", "memory": "1536Mi"}
    summed = compute_used(
        eq("q", "ns", max=res(cpu=1)),
        [pod("a", phase="Running", containers=[container(res(cpu="500m"))])] * 2,
    )
    assert str(summed["cpu"]) == "1"
    assert same_resources(summed, q(cpu="1000m"))
    assert not same_resources(summed, q(cpu=1, mem=0)), "key sets must match"
    assert not same_resources(None, summed)


def test_event_filter_passes_only_events_involving_running_pods() -> None:
    keep = pod_may_change_used()
    running, pending, done = pod("r", phase="Running"), pod("p", phase="Pending"), pod("d", phase="Succeeded")
    assert keep.create(CreateEvent(running))
    assert not keep.create(CreateEvent(pending))
    assert keep.update(UpdateEvent(pending, running))
    assert keep.update(UpdateEvent(running, done)), "leaving Running lowers used"
    assert not keep.update(UpdateEvent(pending, done))
    assert keep.delete(DeleteEvent(running))
    assert not keep.delete(DeleteEvent(done))


async def test_unparsable_request_is_a_terminal_error() -> None:
    # Divergence S-9: retrying cannot fix a quantity Go rejects (a fractional exponent).
    client = fake_api(
        eq("q", "ns", max=res(cpu=4)),
        pod("p", "ns", phase="Running", containers=[container({"cpu": "1e1.5"})]),
    )
    with pytest.raises(TerminalError, match="ElasticQuota ns"):
        await eq_reconciler(client).reconcile(Request("ns", "q"))
    assert client.writes == 0


def ticking_quota(step: float) -> tuple[FakeClient, ElasticQuotaReconciler, Predicate, list[float]]:
    """A quota with p1 Running and p2 Pending, and a reconciler whose clock advances ``step``
    at every reading (so a sum "takes" ``step``); the clock's value is returned to move it."""
    now = [100.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    client = fake_api(
        eq("q", "ns", max=res(cpu=8)),
        pod("p1", "ns", phase="Running", containers=[container(res(cpu=1))]),
        pod("p2", "ns", phase="Pending", containers=[container(res(cpu=2))]),
    )
    rec = eq_reconciler(client, clock=clock)
    return client, rec, rec.change_tracker(), now


async def test_a_churning_namespace_is_recomputed_at_most_once_per_spacing() -> None:
    # docs/divergences.md (Scheduling): with 5,000 pods a recomputation took up to 1.7 s, and
    # recomputing on every pod status update let one namespace take the whole event loop.
    client, rec, changed, now = ticking_quota(0.5)
    p1 = await client.get(POD, "p1", "ns")

    assert changed.create(CreateEvent(p1))
    assert await rec.reconcile(Request("ns", "p1")) is None  # the first change: at once
    assert await used_of(client, "ns", "q") == q(cpu=1)
    assert await rec.reconcile(Request("ns", "p1")) is None  # nothing changed: nothing to do

    old = await client.get(POD, "p2", "ns")
    await set_pod_phase(client, "p2", "Running", "ns")
    new = await client.get(POD, "p2", "ns")
    assert changed.update(UpdateEvent(old, new))
    result = await rec.reconcile(Request("ns", "p2"))  # 0.5 s after a 0.5 s recomputation
    assert result is not None and 0 < result.requeue_after <= RECOMPUTE_SPACING * 0.5
    assert await used_of(client, "ns", "q") == q(cpu=1), "not recomputed yet"

    now[0] += RECOMPUTE_SPACING * 0.5  # the requeued request comes back
    assert await rec.reconcile(Request("ns", "p2")) is None
    assert await used_of(client, "ns", "q") == q(cpu=3), "the change is not lost, only summed later"
    messages = sorted(e["message"] for e in await events(client))
    assert messages == ["Elastic Quota ns/p1 synced successfully", "Elastic Quota ns/p2 synced successfully"]


async def test_a_cheap_sum_is_never_held_back() -> None:
    # a namespace of a few hundred pods is recomputed on every change, as upstream
    client, rec, changed, _ = ticking_quota(0.001)
    assert changed.create(CreateEvent(await client.get(POD, "p1", "ns")))
    assert await rec.reconcile(Request("ns", "p1")) is None
    old = await client.get(POD, "p2", "ns")
    await set_pod_phase(client, "p2", "Running", "ns")
    assert changed.update(UpdateEvent(old, await client.get(POD, "p2", "ns")))
    assert await rec.reconcile(Request("ns", "p2")) is None
    assert await used_of(client, "ns", "q") == q(cpu=3)


async def test_spacings_that_ran_out_are_forgotten() -> None:
    # one entry per namespace being spaced now: a deleted namespace's spacing does not stay behind
    _, rec, _, now = ticking_quota(0.0)
    rec._space("deleted-namespace", 0.5)
    rec._space("ns", 0.5)
    now[0] += RECOMPUTE_SPACING * 0.5 + 1  # both spacings run out
    rec._space("busy", 0.5)
    assert set(rec._not_before) == {"busy"}
