"""Discovery rides out a briefly unreachable API server (docs/reliability.md): transient
failures are retried with backoff within a bound, anything else fails at once."""

from __future__ import annotations

from typing import Any

import pytest

from manager.client.errors import Forbidden, ServiceUnavailable, TransportError
from manager.client.restmapper import NoKindMatch, RESTMapper
from manager.scheme import GroupVersionKind

JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
DISCOVERY = {"resources": [{"name": "jobsets", "kind": "JobSet", "namespaced": True}]}


class Flaky:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    async def request(self, method: str, path: str, **_: Any) -> Any:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return DISCOVERY


async def test_connection_refused_and_503_are_retried_until_discovery_answers() -> None:
    transport = Flaky([TransportError("connection refused"), ServiceUnavailable("down", code=503)])
    mapping = await RESTMapper(transport, retry_seconds=10).mapping(JOBSET)
    assert (mapping.plural, mapping.namespaced, transport.calls) == ("jobsets", True, 3)


async def test_a_forbidden_discovery_fails_at_once() -> None:
    transport = Flaky([Forbidden("no", code=403)])
    with pytest.raises(Forbidden):
        await RESTMapper(transport, retry_seconds=10).mapping(JOBSET)
    assert transport.calls == 1


async def test_retries_are_bounded() -> None:
    transport = Flaky([TransportError("refused")] * 100)
    with pytest.raises(TransportError):
        await RESTMapper(transport, retry_seconds=1.0).mapping(JOBSET)
    assert 2 <= transport.calls <= 3  # 0.5 s then 1 s would pass the bound


async def test_an_unserved_group_is_still_no_kind_match() -> None:
    class Missing:
        async def request(self, method: str, path: str, **_: Any) -> Any:
            from manager.client.errors import NotFound

            raise NotFound("404", code=404)

    with pytest.raises(NoKindMatch):
        await RESTMapper(Missing()).mapping(JOBSET)
