"""``EventsV1Recorder``: events.k8s.io/v1 Events as client-go's ``tools/events`` writes them."""

from __future__ import annotations

import re
from typing import Any

from manager.events import SERIES_FINISH_SECONDS, EventsV1Recorder, event_name
from manager.scheme import GroupVersionKind
from manager.testing.fake import FakeClient

EVENT = GroupVersionKind("events.k8s.io", "v1", "Event")
Json = dict[str, Any]


def trainjob(rv: str = "7") -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1", "resourceVersion": rv},
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def recorder(client: FakeClient, clock: Clock | None = None) -> EventsV1Recorder:
    return EventsV1Recorder(
        client,
        reporting_controller="trainer-trainjob-controller",
        action="Reconciling",
        reporting_instance="trainer-trainjob-controller-host",
        clock=clock or Clock(),
    )


async def test_an_event_has_client_gos_fields() -> None:
    client = FakeClient()
    written = await recorder(client).event(trainjob(), "Warning", "TrainJobResourcesCreationFailed", "boom")
    assert written is not None
    (stored,) = await client.list(EVENT, namespace="ns")
    assert re.fullmatch(r"tj\.[0-9a-f]+", stored["metadata"]["name"])
    assert stored["metadata"]["namespace"] == "ns"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stored["eventTime"])
    assert {
        k: stored[k] for k in ("reportingController", "reportingInstance", "action", "reason", "note", "type")
    } == {
        "reportingController": "trainer-trainjob-controller",
        "reportingInstance": "trainer-trainjob-controller-host",
        "action": "Reconciling",
        "reason": "TrainJobResourcesCreationFailed",
        "note": "boom",
        "type": "Warning",
    }
    assert stored["regarding"] == {
        "kind": "TrainJob",
        "namespace": "ns",
        "name": "tj",
        "uid": "u-1",
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "resourceVersion": "7",
    }
    assert "series" not in stored and "related" not in stored


def test_event_names_are_the_object_and_the_time_in_hex_or_a_uuid() -> None:
    assert event_name("tj", 255) == "tj.ff"
    assert re.fullmatch(r"[0-9a-f-]{36}", event_name("Not_A_Name", 255))


async def test_the_default_reporting_instance_names_the_host() -> None:
    rec = EventsV1Recorder(FakeClient(), reporting_controller="c", action="a")
    assert rec.reporting_instance.startswith("c-") and len(rec.reporting_instance) > 2


async def test_an_isomorphic_event_becomes_a_series_of_the_first_whatever_its_note() -> None:
    client, clock = FakeClient(), Clock()
    rec = recorder(client, clock)
    await rec.event(trainjob(), "Warning", "R", "first")
    clock.now += 5
    await rec.event(trainjob(), "Warning", "R", "second note")
    (stored,) = await client.list(EVENT, namespace="ns")
    assert stored["note"] == "first"
    assert stored["series"]["count"] == 2
    # further ones count in memory; the count is written when the series has ended
    clock.now += 5
    await rec.event(trainjob(), "Warning", "R", "third")
    (stored,) = await client.list(EVENT, namespace="ns")
    assert stored["series"]["count"] == 2
    clock.now += SERIES_FINISH_SECONDS + 1
    await rec.event(trainjob(), "Warning", "R", "after the series")
    events = sorted(await client.list(EVENT, namespace="ns"), key=lambda e: e["note"])
    assert [(e["note"], (e.get("series") or {}).get("count")) for e in events] == [
        ("after the series", None),
        ("first", 3),
    ]


async def test_another_regarding_object_or_reason_is_another_event() -> None:
    client = FakeClient()
    rec = recorder(client)
    await rec.event(trainjob("7"), "Warning", "R", "n")
    await rec.event(trainjob("8"), "Warning", "R", "n")  # the reference has the resourceVersion
    await rec.event(trainjob("8"), "Warning", "Other", "n")
    events = await client.list(EVENT, namespace="ns")
    assert len(events) == 3 and not any("series" in e for e in events)


async def test_a_series_whose_event_is_gone_is_written_again() -> None:
    client = FakeClient()
    rec = recorder(client)
    await rec.event(trainjob(), "Warning", "R", "n")
    (stored,) = await client.list(EVENT, namespace="ns")
    await client.delete(stored)
    await rec.event(trainjob(), "Warning", "R", "n")
    (again,) = await client.list(EVENT, namespace="ns")
    assert again["metadata"]["name"] == stored["metadata"]["name"] and again["series"]["count"] == 2
