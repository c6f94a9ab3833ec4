"""The ElasticQuota controller's Running-pod requests kept from the Pod events.

A recomputation sums what :class:`RunningPodRequests` kept instead of reading and re-parsing
every Running pod of the namespace from the cache. What it sums must be exactly what the cache
read summed: the same pods, in the same order (the phase index's), so ``used`` prints the same.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_fixtures import container, eq, eq_reconciler, fake_api, pod, res

from manager.cache.store import Store, field_index_func, field_index_name, object_key
from manager.controller.event import CreateEvent, DeleteEvent, UpdateEvent
from manager.controller.reconcile import Request, TerminalError
from trainer.api.resources import render_resources
from trainer.controllers.elasticquota import (
    ELASTICQUOTA,
    RunningPodRequests,
    compute_used,
    sum_requests,
)

pytestmark = pytest.mark.unit

Object = dict[str, Any]
QUOTA = eq("q", "ns", min=res(cpu=1), max=res(cpu=8, mem="8Gi"))
PHASE_INDEX = field_index_name("status.phase")


def index_pod_phase(pod: Object) -> list[str]:
    """What the reconciler read before it kept the requests: the cache's pods by phase."""
    phase = (pod.get("status") or {}).get("phase")
    return [phase] if isinstance(phase, str) and phase else []


class Informer:
    """The informer's order of work: change the store, then hand the event to the predicate."""

    def __init__(self) -> None:
        self.store = Store(compact=True)
        self.store.add_index(PHASE_INDEX, field_index_func(index_pod_phase))
        self.running = RunningPodRequests()
        self.observer = self.running.observer()

    def put(self, obj: Object) -> None:
        old = self.store.put(obj)
        if old is None:
            assert self.observer.create(CreateEvent(obj))
        else:
            assert self.observer.update(UpdateEvent(old, obj))

    def delete(self, obj: Object) -> None:
        old = self.store.delete(object_key(obj))
        if old is not None:
            assert self.observer.delete(DeleteEvent(old))

    def used_from_cache(self, namespace: str) -> dict[str, str]:
        pods = self.store.by_index(PHASE_INDEX, f"{namespace}/Running")
        return render_resources(compute_used(QUOTA, pods))

    def used_from_events(self, namespace: str) -> dict[str, str]:
        return render_resources(sum_requests(QUOTA, self.running.in_namespace(namespace)))


# memory in several formats, so the order of the sum shows in how `used` prints
REQUESTS = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["100m", "1", "250m", "2"]),
        "memory": st.sampled_from(["128Mi", "1G", "512M", "1Gi", "100"]),
        "nvidia.com/gpu": st.sampled_from(["1", "2"]),
    },
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["ns", "other"]),
        st.sampled_from(["Running", "Pending", "Succeeded"]),
        REQUESTS,
        st.one_of(st.none(), REQUESTS),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_the_kept_requests_sum_as_the_cached_running_pods_do(ops: list[tuple[Any, ...]]) -> None:
    informer = Informer()
    for rv, (op, name, namespace, phase, requests, init) in enumerate(ops, start=1):
        obj = pod(
            name,
            namespace,
            group=None,
            phase=phase,
            containers=[container(requests)],
            init=[container(init)] if init else None,
        )
        obj["metadata"]["resourceVersion"] = str(rv)
        if op == "put":
            informer.put(obj)
        else:
            informer.delete(obj)
        for ns in ("ns", "other"):
            assert informer.used_from_events(ns) == informer.used_from_cache(ns)


def test_a_pod_that_stops_running_or_goes_leaves_the_sum() -> None:
    informer = Informer()
    informer.put(pod("a", "ns", phase="Running", containers=[container(res(cpu=2))]))
    informer.put(pod("b", "ns", phase="Running", containers=[container(res(cpu=3))]))
    assert informer.used_from_events("ns") == {"cpu": "5", "memory": "0"}
    informer.put(pod("a", "ns", phase="Succeeded", containers=[container(res(cpu=2))]))
    assert informer.used_from_events("ns") == {"cpu": "3", "memory": "0"}
    informer.delete(pod("b", "ns"))
    assert informer.used_from_events("ns") == {"cpu": "0", "memory": "0"}
    assert informer.running._by_namespace == {}, "an emptied namespace is forgotten"


async def test_the_reconciler_sums_the_kept_requests_and_patches_as_it_would_reading_pods() -> None:
    running_pod = pod("p", "ns", phase="Running", containers=[container(res(cpu=2, mem="1Gi"))])
    client = fake_api(eq("q", "ns", max=res(cpu=8, mem="8Gi")), running_pod)
    rec = eq_reconciler(client)  # its requests fed by the fake's Pod events, as by the watch
    await rec.reconcile(Request("ns", "p"))
    stored = await client.get(ELASTICQUOTA, "q", "ns")
    assert stored["status"]["used"] == {"cpu": "2", "memory": "1Gi"}


async def test_a_kept_request_that_does_not_parse_is_a_terminal_error() -> None:
    # as reading the pod would (S-9): the quantity is kept as its error, raised by the sum
    bad = pod("p", "ns", phase="Running", containers=[container({"cpu": "1e1.5"})])
    client = fake_api(eq("q", "ns", max=res(cpu=4)), bad)
    rec = eq_reconciler(client)
    with pytest.raises(TerminalError, match="ElasticQuota ns"):
        await rec.reconcile(Request("ns", "q"))
    assert client.writes == 0


def test_pods_that_request_the_same_share_one_parsed_request() -> None:
    # 100k Running pods kept ~500 bytes each without sharing, ~100 with (a Deployment's pods
    # all request the same)
    informer = Informer()
    for name in ("a", "b"):
        informer.put(pod(name, "ns", phase="Running", containers=[container(res(cpu=1, mem="1Gi"))]))
    informer.put(pod("c", "ns", phase="Running", containers=[container(res(cpu=2))]))
    kept = informer.running._by_namespace["ns"]
    assert kept["a"] is kept["b"] and kept["c"] is not kept["a"]
    assert informer.used_from_events("ns") == {"cpu": "4", "memory": "2Gi"}
    informer.put(pod("a", "ns", phase="Succeeded", containers=[container(res(cpu=1, mem="1Gi"))]))
    assert informer.used_from_events("ns") == {"cpu": "3", "memory": "1Gi"}, "b's share stays whole"
