"""The metrics auth filter with a scripted API: status codes, cache TTLs, retries (no network)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from manager._http import HTTPServer
from manager.client.errors import ApiError, Forbidden
from manager.metrics.filters import (
    AUTHN_CACHE_TTL,
    AUTHZ_ALLOW_CACHE_TTL,
    AUTHZ_DENY_CACHE_TTL,
    with_authentication_and_authorization,
)
from manager.metrics.server import metrics_app
from manager.testing.clock import FakeClock


class ScriptedAPI:
    """Answers TokenReviews from a token->user map and SARs from an allowed-user set."""

    def __init__(self) -> None:
        self.users = {"good": "alice", "denied": "bob"}
        self.allowed = {"alice"}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failures: list[tuple[str, BaseException]] = []

    async def create(self, obj: Any) -> Any:
        self.calls.append((obj["kind"], obj["spec"]))
        if self.failures and self.failures[0][0] == obj["kind"]:
            raise self.failures.pop(0)[1]
        if obj["kind"] == "TokenReview":
            user = self.users.get(obj["spec"]["token"])
            if user is None:
                return {**obj, "status": {"authenticated": False, "error": "invalid bearer token"}}
            return {**obj, "status": {"authenticated": True, "user": {"username": user, "groups": ["devs"]}}}
        allowed = obj["spec"]["user"] in self.allowed
        return {**obj, "status": {"allowed": allowed, "reason": "" if allowed else "no RBAC policy matched"}}

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]


@pytest.fixture
def api() -> ScriptedAPI:
    return ScriptedAPI()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def url(api: ScriptedAPI, clock: FakeClock) -> AsyncIterator[str]:
    import asyncio

    registry = CollectorRegistry()
    Counter("filter_test_total", "x", registry=registry).inc()

    async def extra(_request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text="extra")

    auth_filter = with_authentication_and_authorization(api, clock=clock, retry_delays=(0.0, 0.0))
    server = HTTPServer(
        metrics_app(registry, {"/debug/extra": extra}, filter=auth_filter), "127.0.0.1:0", name="metrics"
    )
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 5)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def get(url: str, token: str | None = None, header: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": header or f"Bearer {token}"} if (token or header) else {}
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_status_codes_and_bodies(url: str, api: ScriptedAPI) -> None:
    assert await get(f"{url}/metrics") == (401, "Unauthorized\n")
    assert await get(f"{url}/metrics", header="Basic Zm9vOmJhcg==") == (401, "Unauthorized\n")
    assert await get(f"{url}/metrics", header="Bearer") == (401, "Unauthorized\n")
    assert await get(f"{url}/metrics", "not-a-token") == (401, "Unauthorized\n")
    assert await get(f"{url}/metrics", "denied") == (403, "Authorization denied for user bob\n")
    status, body = await get(f"{url}/metrics", "good")
    assert status == 200 and "filter_test_total 1.0" in body
    assert await get(f"{url}/debug/extra", "good") == (200, "extra"), "extra handlers are filtered too"
    assert await get(f"{url}/debug/extra") == (401, "Unauthorized\n")
    (sar,) = [spec for kind, spec in api.calls if kind == "SubjectAccessReview" and spec["user"] == "alice"][
        :1
    ]
    assert sar["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    assert sar["groups"] == ["devs", "system:authenticated"]


async def test_lower_case_bearer_scheme_is_accepted(url: str) -> None:
    status, _ = await get(f"{url}/metrics", header="bearer good")
    assert status == 200


async def test_results_are_cached_for_controller_runtimes_ttls(
    url: str, api: ScriptedAPI, clock: FakeClock
) -> None:
    assert (await get(f"{url}/metrics", "good"))[0] == 200
    assert api.kinds() == ["TokenReview", "SubjectAccessReview"]
    for _ in range(3):
        assert (await get(f"{url}/metrics", "good"))[0] == 200
    assert len(api.calls) == 2, "a scrape within the TTLs costs no API call"

    clock._now += AUTHN_CACHE_TTL + 1  # the token's review expired, the allow decision did not
    assert (await get(f"{url}/metrics", "good"))[0] == 200
    assert api.kinds()[2:] == ["TokenReview"]

    clock._now += AUTHZ_ALLOW_CACHE_TTL
    assert (await get(f"{url}/metrics", "good"))[0] == 200
    assert api.kinds()[3:] == ["TokenReview", "SubjectAccessReview"]

    # a denial is remembered for 30 s only: granting access takes effect after that
    assert (await get(f"{url}/metrics", "denied"))[0] == 403
    api.allowed.add("bob")
    assert (await get(f"{url}/metrics", "denied"))[0] == 403, "cached denial"
    clock._now += AUTHZ_DENY_CACHE_TTL + 1
    status, _ = await get(f"{url}/metrics", "denied")
    assert status == 200

    # an unauthenticated token is remembered too (one review per minute, not per request)
    before = len(api.calls)
    for _ in range(3):
        assert (await get(f"{url}/metrics", "bogus"))[0] == 401
    assert len(api.calls) == before + 1


async def test_api_failures_are_retried_then_answer_500(url: str, api: ScriptedAPI) -> None:
    api.failures = [("TokenReview", ApiError("etcd is slow", code=503))]
    assert (await get(f"{url}/metrics", "good"))[0] == 200, "a transient failure is retried"
    api.failures = [("TokenReview", ApiError("down", code=503))] * 3
    assert await get(f"{url}/metrics", "other") == (500, "Authentication failed\n")
    api.failures = [("SubjectAccessReview", Forbidden("cannot create subjectaccessreviews", code=403))]
    api.users["carol"] = "carol"
    assert await get(f"{url}/metrics", "carol") == (500, "Authorization for user carol failed\n")
