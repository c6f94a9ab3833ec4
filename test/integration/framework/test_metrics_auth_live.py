"""Secure metrics on the real API server: TokenReview + SubjectAccessReview, with the shipped RBAC.

The manager here runs as the shipped ServiceAccount (a TokenRequest token, no client
certificate) with only the shipped ``kubeflow-trainer-metrics-auth-role`` bound to it, so the
test fails if that role lacks a permission the filter needs. Scrapers are ServiceAccounts of
the test namespace: one bound to the shipped ``kubeflow-trainer-metrics-reader``, one not.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from manager import Manager, Options
from manager.cluster import Cluster
from manager.config import RestConfig
from manager.envtest import Environment
from manager.metrics.filters import AuthFilter, with_authentication_and_authorization
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
RBAC = ROOT / "config" / "rbac"
MANAGER_NS = "kubeflow-system"
MANAGER_SA = "kubeflow-trainer-controller-manager"


async def _ok(env: Environment, method: str, path: str, body: Any = None) -> Any:
    status, answer = await env.request(method, path, body)
    assert status in (200, 201), (method, path, status, answer)
    return answer


async def _allowed(env: Environment, user: str, group: str, resource: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {"verb": "create", "group": group, "resource": resource},
        },
    }
    answer = await _ok(env, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


@pytest.fixture
async def shipped_metrics_rbac(control_plane: Environment) -> AsyncIterator[None]:
    await control_plane.apply(
        f"/api/v1/namespaces/{MANAGER_NS}",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MANAGER_NS}},
    )
    files = [
        RBAC / "metrics_reader_role.yaml",
        RBAC / "metrics_auth_role.yaml",
        RBAC / "metrics_auth_role_binding.yaml",
    ]
    kustomization = yaml.safe_load((RBAC / "kustomization.yaml").read_text())
    assert {f.name for f in files} <= set(kustomization["resources"]), "shipped by config/rbac"
    applied = await control_plane.apply_manifests(files, field_manager="metrics-auth-test")
    assert applied == [
        "ClusterRole/kubeflow-trainer-metrics-reader",
        "ClusterRole/kubeflow-trainer-metrics-auth-role",
        "ClusterRoleBinding/kubeflow-trainer-metrics-auth-rolebinding",
    ]
    yield


@pytest.fixture
async def manager_as_shipped_sa(
    control_plane: Environment, shipped_metrics_rbac: None
) -> AsyncIterator[tuple[Manager, list[AuthFilter]]]:
    token = await control_plane.service_account_token(MANAGER_NS, MANAGER_SA)

    async def bearer() -> str:
        return f"Bearer {token}"

    rest = RestConfig(
        host=control_plane.url, ssl_context=control_plane.ssl_context(client_cert=False), token_source=bearer
    )
    filters: list[AuthFilter] = []

    def provider(client: Any) -> AuthFilter:
        filters.append(with_authentication_and_authorization(client))
        return filters[-1]

    async with Cluster(rest, field_owner="metrics-auth-test") as cluster:
        options = Options(
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="0",
            metrics_secure_serving=True,
            metrics_filter_provider=provider,
        )
        mgr = Manager(cluster, options)
        task = asyncio.create_task(mgr.run())
        try:
            await asyncio.wait_for(mgr.elected.wait(), 30)

            async def listening() -> None:
                assert mgr.metrics_server is not None and mgr.metrics_server.port is not None

            await eventually(listening, timeout=30, message="the metrics server never listened")
            yield mgr, filters
        finally:
            mgr.stop()
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)


@pytest.fixture
async def scrapers(control_plane: Environment, namespace: str) -> AsyncIterator[dict[str, str]]:
    """Tokens of two ServiceAccounts: ``reader`` bound to the shipped metrics-reader role, ``other`` not."""
    reader = await control_plane.service_account_token(namespace, "prometheus")
    other = await control_plane.service_account_token(namespace, "nosy")
    binding = f"metrics-reader-{uuid.uuid4().hex[:8]}"
    manifest = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": binding},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "kubeflow-trainer-metrics-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
    }
    await _ok(control_plane, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", manifest)
    # the RBAC authorizer learns of the binding from its informer: scrape only once it has
    await control_plane.wait_binding_effective(manifest)
    try:
        yield {"reader": reader, "other": other}
    finally:
        await control_plane.request(
            "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}"
        )


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the self-signed certificate a scraper is told to skip
    return context


async def _scrape(port: int, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=_insecure()) as resp,
    ):
        return resp.status, await resp.text()


async def test_the_shipped_auth_role_lets_the_manager_review_tokens_and_access(
    control_plane: Environment, shipped_metrics_rbac: None
) -> None:
    user = f"system:serviceaccount:{MANAGER_NS}:{MANAGER_SA}"
    assert await _allowed(control_plane, user, "authentication.k8s.io", "tokenreviews")
    assert await _allowed(control_plane, user, "authorization.k8s.io", "subjectaccessreviews")


async def test_metrics_need_a_token_and_the_metrics_reader_role(
    control_plane: Environment,
    manager_as_shipped_sa: tuple[Manager, list[AuthFilter]],
    scrapers: dict[str, str],
    namespace: str,
) -> None:
    mgr, (auth_filter,) = manager_as_shipped_sa
    assert mgr.metrics_server is not None and mgr.metrics_server.port is not None
    port = mgr.metrics_server.port

    assert await _scrape(port) == (401, "Unauthorized\n")
    assert await _scrape(port, "not-a-token") == (401, "Unauthorized\n")
    status, body = await _scrape(port, scrapers["other"])
    assert (status, body) == (403, f"Authorization denied for user system:serviceaccount:{namespace}:nosy\n")

    status, body = await _scrape(port, scrapers["reader"])
    assert status == 200, body
    # metric names are the ones dashboards query (controller-runtime's and client-go's)
    assert "# TYPE controller_runtime_reconcile_total counter" in body
    assert "rest_client_requests_total" in body

    reviews = auth_filter.auth.reviews
    for _ in range(5):
        assert (await _scrape(port, scrapers["reader"]))[0] == 200
    assert auth_filter.auth.reviews == reviews, "repeated scrapes are served from the caches"

    with pytest.raises(aiohttp.ClientError):
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
            await resp.read()  # plain HTTP is not served when secure serving is on
