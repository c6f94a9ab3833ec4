"""PodGroup reconciler against a fake API: upstream's unit cases (§7.1) and the derived ones (§7.6)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from sched_fixtures import NOW, events, fake_api, get_pg, pg, pg_reconciler, pod, rfc3339, set_pod_phase

from manager.client.errors import ApiError
from manager.controller.reconcile import Request
from trainer.controllers.podgroup import POD, map_pod_to_group

HOUR = datetime.timedelta(hours=1)


async def run_case(
    *,
    min_member: int,
    previous: str,
    pod_names: list[str],
    pod_phase: str,
    next_phase: str | None = None,
    name: str = "pg",
    created: datetime.datetime = NOW,
    **status: Any,
) -> tuple[dict[str, Any], Any]:
    """Upstream's ``Test_Run`` procedure: only the first two pods are stored; for each listed
    pod, write its phase (silently failing for unstored ones), map it to its group, reconcile."""
    group = pg(
        name,
        min_member=min_member,
        phase=previous,
        created=created,
        occupiedBy="test",
        scheduleStartTime=rfc3339(NOW),
        **status,
    )
    stored = [pod(n, group=name, phase=pod_phase) for n in pod_names[:2]]
    client = fake_api(group, *stored)
    reconciler = pg_reconciler(client)
    for pod_name in pod_names:
        await set_pod_phase(client, pod_name, next_phase or pod_phase)
        for req in map_pod_to_group(pod(pod_name, group=name)):
            await reconciler.reconcile(req)
    return await get_pg(client, name), client


async def test_group_running() -> None:
    # spec: scheduling 1
    got, _ = await run_case(
        min_member=2, previous="Scheduling", pod_names=["pod1", "pod2"], pod_phase="Running"
    )
    assert got["status"]["phase"] == "Running"
    assert got["status"]["running"] == 2


async def test_group_running_more_than_min_member() -> None:
    # spec: scheduling 2
    got, _ = await run_case(
        min_member=2,
        previous="Scheduling",
        name="pg11",
        pod_names=["pod11", "pod21", "pod31", "pod41"],
        pod_phase="Running",
    )
    assert got["status"]["phase"] == "Running"


async def test_group_failed_and_terminal() -> None:
    # spec: scheduling 3
    got, client = await run_case(
        min_member=2, previous="Scheduling", pod_names=["pod1", "pod2"], pod_phase="Failed"
    )
    assert got["status"]["phase"] == "Failed"
    assert client.requests["status.patch"] == 3, (
        "2 phase writes + 1 patch: the reconcile after Failed writes nothing"
    )


async def test_group_finished() -> None:
    # spec: scheduling 4
    got, _ = await run_case(
        min_member=2, previous="Scheduling", pod_names=["pod1", "pod2"], pod_phase="Succeeded"
    )
    assert got["status"]["phase"] == "Finished"


async def test_pending_to_scheduling() -> None:
    # spec: scheduling 5
    got, _ = await run_case(min_member=2, previous="Pending", pod_names=["pod1", "pod2"], pod_phase="Pending")
    assert got["status"]["phase"] == "Scheduling"


async def test_scheduling_to_finished() -> None:
    # spec: scheduling 6
    got, _ = await run_case(
        min_member=2,
        previous="Scheduling",
        pod_names=["pod1", "pod2"],
        pod_phase="Pending",
        next_phase="Succeeded",
    )
    assert got["status"]["phase"] == "Finished"


async def test_keeps_pending_below_min_member() -> None:
    # spec: scheduling 7
    got, _ = await run_case(min_member=3, previous="Pending", pod_names=["pod1", "pod2"], pod_phase="Running")
    assert got["status"]["phase"] == "Pending"


async def test_pending_to_finished_through_scheduling() -> None:
    # spec: scheduling 8
    got, _ = await run_case(
        min_member=2,
        previous="Pending",
        pod_names=["pod1", "pod2"],
        pod_phase="Pending",
        next_phase="Succeeded",
    )
    assert got["status"]["phase"] == "Finished"
    assert got["status"]["occupiedBy"] == "test", "no owners: occupiedBy untouched in P2"


async def test_48_hour_rule_keeps_pending_and_warns_each_reconcile() -> None:
    # spec: scheduling 9
    got, client = await run_case(
        min_member=2,
        previous="Pending",
        pod_names=["pod1", "pod2"],
        pod_phase="Running",
        created=NOW - 72 * HOUR,
        running=0,
    )
    assert got["status"]["phase"] == "Pending"
    assert client.requests["status.patch"] == 2, "only the two pod phase writes; no PodGroup status write"
    (event,) = await events(client)
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "Timeout",
        "schedule time longer than 48 hours",
    )
    assert event["source"]["component"] == "PodGroupController"
    assert event["count"] == 2, "one warning per reconcile (the recorder folds repeats into a count)"


async def test_min_member_more_than_pods() -> None:
    # spec: scheduling 10
    got, _ = await run_case(
        min_member=3, previous="Pending", name="pg9", pod_names=["pod1", "pod2"], pod_phase="Pending"
    )
    assert got["status"]["phase"] == "Pending"


async def test_running_to_pending_writes_zero_counters() -> None:
    # spec: scheduling 11
    got, _ = await run_case(
        min_member=4,
        previous="Running",
        name="pg10",
        pod_names=["pod1", "pod2"],
        pod_phase="Pending",
        running=3,
        succeeded=1,
    )
    assert got["status"]["phase"] == "Pending"
    assert [got["status"].get(k, 0) for k in ("running", "succeeded", "failed")] == [0, 0, 0]


@pytest.mark.parametrize(
    ("owners", "expected"),
    [
        (["new-occupied"], "default/new-occupied"),  # spec: scheduling 12
        (
            ["new-occupied-2", "new-occupied-1"],
            "default/new-occupied-1,default/new-occupied-2",
        ),  # spec: scheduling 13
    ],
)
async def test_fill_occupied_by(owners: list[str], expected: str) -> None:
    # spec: scheduling 12
    # spec: scheduling 13
    client = fake_api(
        pg(min_member=2, phase="Pending", occupiedBy="test"),
        pod("p1", owners=owners),
        pod("p2", owners=owners),
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    status = (await get_pg(client))["status"]
    assert status["occupiedBy"] == expected
    assert status["phase"] == "Scheduling"


# -- derived scenarios (§7.6) ------------------------------------------------------------------


async def test_new_group_goes_pending_without_counters() -> None:
    # spec: scheduling 48
    client = fake_api(pg(min_member=3), *(pod(f"p{i}", phase="Running") for i in range(3)))
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Pending"}


async def test_pending_to_scheduling_keeps_stale_counters_then_running() -> None:
    # spec: scheduling 49
    client = fake_api(pg(min_member=3, phase="Pending"), *(pod(f"p{i}", phase="Running") for i in range(3)))
    reconciler = pg_reconciler(client)
    await reconciler.reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Scheduling"}
    await reconciler.reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Running", "running": 3}


@pytest.mark.parametrize("terminal", ["Finished", "Failed"])
@pytest.mark.parametrize("pod_phases", [[], ["Running"] * 3, ["Pending", "Failed"]])
async def test_terminal_group_never_written(terminal: str, pod_phases: list[str]) -> None:
    # spec: scheduling 50
    client = fake_api(
        pg(min_member=2, phase=terminal), *(pod(f"p{i}", phase=ph) for i, ph in enumerate(pod_phases))
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert client.writes == 0
    assert client.requests["list"] == 0, "terminal check comes before the pod list"


@pytest.mark.parametrize(
    ("gap", "phase", "running", "skipped"),
    [
        (datetime.timedelta(hours=48), "Pending", 0, False),
        (datetime.timedelta(hours=48, seconds=1), "Pending", 0, True),
        (datetime.timedelta(hours=48, seconds=1), "Scheduling", 0, True),
        (datetime.timedelta(hours=48, seconds=1), "Scheduling", 1, False),
        (datetime.timedelta(hours=48, seconds=1), "Running", 0, False),
        (datetime.timedelta(hours=48, seconds=1), None, 0, False),
    ],
)
async def test_48_hour_boundary(
    gap: datetime.timedelta, phase: str | None, running: int, skipped: bool
) -> None:
    # spec: scheduling 51
    group = pg(
        min_member=2,
        phase=phase,
        created=NOW - gap,
        scheduleStartTime=rfc3339(NOW),
        **({"running": running} if running else {}),
    )
    client = fake_api(group, pod("p1", phase="Running"), pod("p2", phase="Running"))
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    warnings = [e for e in await events(client) if e["reason"] == "Timeout"]
    if skipped:
        assert client.requests["status.patch"] == 0
        assert [e["message"] for e in warnings] == ["schedule time longer than 48 hours"]
    else:
        assert not warnings
        assert client.requests["status.patch"] == 1


async def test_no_schedule_start_time_never_applies_the_rule() -> None:
    # spec: scheduling 52
    client = fake_api(
        pg(min_member=2, phase="Pending", created=NOW - 1000 * HOUR),
        pod("p1", phase="Running"),
        pod("p2", phase="Running"),
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"]["phase"] == "Scheduling"
    assert await events(client) == []


@pytest.mark.parametrize(
    ("spec_id", "min_member", "phases", "expected"),
    [
        (53, 2, ["Running", "Running", "Failed"], ("Failed", 2, 0, 1)),
        (54, 3, ["Failed", "Pending", "Pending"], ("Scheduling", 0, 0, 1)),
        (55, 2, ["Succeeded", "Succeeded", "Failed"], ("Finished", 0, 2, 1)),
        (56, 3, ["Succeeded", "Running", "Running"], ("Running", 2, 1, 0)),
    ],
)
async def test_p3_decision_table(
    spec_id: int, min_member: int, phases: list[str], expected: tuple[str, int, int, int]
) -> None:
    # spec: scheduling 53
    # spec: scheduling 54
    # spec: scheduling 55
    # spec: scheduling 56
    client = fake_api(
        pg(min_member=min_member, phase="Scheduling"),
        *(pod(f"p{i}", phase=ph) for i, ph in enumerate(phases)),
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    status = (await get_pg(client))["status"]
    got = (status["phase"], status.get("running", 0), status.get("succeeded", 0), status.get("failed", 0))
    assert got == expected, f"scenario {spec_id}"


async def test_pod_deleted_demotes_and_counters_freeze_in_pending() -> None:
    # spec: scheduling 57
    client = fake_api(
        pg(min_member=3, phase="Running", running=3), *(pod(f"p{i}", phase="Running") for i in range(3))
    )
    reconciler = pg_reconciler(client)
    await client.delete_by_name(POD, "p0", "default")
    await reconciler.reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Pending", "running": 2}
    await set_pod_phase(client, "p1", "Succeeded")
    await reconciler.reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Pending", "running": 2}, "stale counters (Q2)"


async def test_missing_group_is_a_no_op() -> None:
    # spec: scheduling 58
    # spec: scheduling 64
    client = fake_api(pod("p1", group="ghost", phase="Running"))
    (req,) = map_pod_to_group(pod("p1", group="ghost"))
    await pg_reconciler(client).reconcile(req)
    assert client.writes == 0
    assert client.requests["create"] == 0, "nothing is recreated"


async def test_other_namespace_pods_do_not_count() -> None:
    # spec: scheduling 61
    # Fixed upstream quirk Q1 (docs/divergences.md S-1): upstream lists pods in every namespace,
    # so ns1/pg would count the two ns2 pods and reach Scheduling; ours lists ns1 only.
    client = fake_api(
        pg("pg", "ns1", min_member=2, phase="Pending"),
        pod("a", "ns2", phase="Running", owners=["j"]),
        pod("b", "ns2", phase="Running", owners=["j"]),
    )
    reconciler = pg_reconciler(client)
    for _ in range(3):
        await reconciler.reconcile(Request("ns1", "pg"))
    status = (await get_pg(client, "pg", "ns1"))["status"]
    assert status == {"phase": "Pending"}, "no cross-namespace pods counted, no ns2 owner in occupiedBy"


async def test_occupied_by_set_once_never_cleared() -> None:
    # spec: scheduling 62
    client = fake_api(
        pg(min_member=1, phase="Pending", occupiedBy="old/value"),
        pod("p1", "default", phase="Running", owners=["j1", "a0"]),
    )
    reconciler = pg_reconciler(client)
    await reconciler.reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"]["occupiedBy"] == "default/a0,default/j1"
    await client.delete_by_name(POD, "p1", "default")
    await reconciler.reconcile(Request("default", "pg"))  # Scheduling -> Pending (0 < 1)
    status = (await get_pg(client))["status"]
    assert status["phase"] == "Pending"
    assert status["occupiedBy"] == "default/a0,default/j1", "never cleared"


async def test_occupied_by_kept_when_chosen_pod_has_no_owners() -> None:
    # spec: scheduling 62
    client = fake_api(pg(min_member=1, phase="Pending", occupiedBy="x/keep"), pod("p1", phase="Pending"))
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Scheduling", "occupiedBy": "x/keep"}


async def test_occupied_by_uses_first_pod_by_name() -> None:
    # Fixed nondeterminism (docs/divergences.md S-3): upstream uses whichever pod the cache lists first.
    client = fake_api(
        pg(min_member=2, phase="Pending"),
        pod("worker-1", owners=["job-worker"]),
        pod("launcher-0", owners=["job-launcher"]),
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"]["occupiedBy"] == "default/job-launcher"


async def test_missing_min_member_with_one_pod_finishes() -> None:
    # spec: scheduling 63
    client = fake_api(pg(min_member=None), pod("p1", phase="Running"))
    reconciler = pg_reconciler(client)
    phases = []
    for _ in range(3):
        await reconciler.reconcile(Request("default", "pg"))
        phases.append((await get_pg(client))["status"]["phase"])
    assert phases == ["Pending", "Scheduling", "Finished"]


async def test_missing_min_member_without_pods_does_not_crash() -> None:
    # spec: scheduling 63
    # Fixed upstream crash (docs/divergences.md S-2): v0.34.1 indexes the empty pod list and
    # panics forever; like the v0.34.4 fix we go to Scheduling without touching occupiedBy.
    client = fake_api(pg(min_member=None, phase="Pending", occupiedBy="keep/me"))
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Scheduling", "occupiedBy": "keep/me"}


async def test_deleted_group_is_a_no_op() -> None:
    # spec: scheduling 64
    client = fake_api(pod("p1", phase="Running"))
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert client.writes == 0


async def test_unchanged_status_sends_no_patch() -> None:
    # Divergence S-4: upstream sends an empty {} status patch plus a main-resource patch on every
    # reconcile; we send nothing when the status would not change.
    client = fake_api(
        pg(min_member=2, phase="Running", running=2), pod("p1", phase="Running"), pod("p2", phase="Running")
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert client.writes == 0


async def test_status_patch_error_is_returned_for_retry() -> None:
    client = fake_api(pg(min_member=1, phase="Pending"), pod("p1"))
    client.inject_error("status.patch", ApiError("boom", code=500))
    with pytest.raises(ApiError):
        await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"] == {"phase": "Pending"}


async def test_unparsable_schedule_start_time_reads_as_absent() -> None:
    # Divergence S-9: Go would fail to decode the object; we treat the value as absent.
    client = fake_api(
        pg(min_member=1, phase="Pending", created=NOW - 100 * HOUR, scheduleStartTime="not-a-time"),
        pod("p1", phase="Running"),
    )
    await pg_reconciler(client).reconcile(Request("default", "pg"))
    assert (await get_pg(client))["status"]["phase"] == "Scheduling"
    assert await events(client) == []
