"""The TrainJob status server's handler: auth, authorisation, rate limit, validation, memory.

A fake API (TokenReview answers and a Pod table) stands in for the API server; the e2e test
(test/e2e/trainer/test_progress_e2e.py) runs the same path against a real cluster.
"""

from __future__ import annotations

import asyncio
import gc
import json
import ssl
import tracemalloc
from typing import Any

import aiohttp
import pytest

from manager._tls import self_signed_pair
from manager.client.errors import ApiError, NotFound
from manager.metrics.filters import DelegatingAuth
from manager.testing.clock import FakeClock
from trainer import features
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.info import ContainerInfo, Info, PodSet, TemplateSpec
from trainer.runtime.plugins import new_registry
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.plugins.trainjobstatus import (
    StatusServerSettings,
    TrainJobStatus,
    status_path,
    token_audience,
)
from trainer.statusserver import ProgressHandler, StatusServer, UpdateRateLimiter, parse_update

NS = "team-a"


def pod(name: str, uid: str, trainjob: str, *, job_owned: bool = True) -> dict[str, Any]:
    refs = [{"apiVersion": "batch/v1", "kind": "Job", "name": f"{trainjob}-node-0", "controller": True}]
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "labels": {"jobset.sigs.k8s.io/jobset-name": trainjob},
            "ownerReferences": refs if job_owned else [],
        }
    }


class FakeAPI:
    """TokenReviews by token: ``tok-<pod>`` is bound to that pod and valid for ``audience_of``."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {
            "job1-node-0-0": pod("job1-node-0-0", "uid-1", "job1"),
            "job2-node-0-0": pod("job2-node-0-0", "uid-2", "job2"),
            "stray": pod("stray", "uid-3", "job1", job_owned=False),
        }
        self.audience_of = {"tok-job1-node-0-0": "job1", "tok-job2-node-0-0": "job2", "tok-stray": "job1"}
        self.reviews: list[dict[str, Any]] = []
        self.applied: list[tuple[str, str, dict[str, Any]]] = []
        self.trainjobs = {"job1", "job2"}
        self.crd_has_trainer_status = True

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        assert obj["kind"] == "TokenReview"
        self.reviews.append(obj)
        token, wanted = obj["spec"]["token"], obj["spec"].get("audiences") or []
        trainjob = self.audience_of.get(token)
        if trainjob is None:
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        audience = token_audience(NS, trainjob)
        if wanted and audience not in wanted:
            return {"status": {"authenticated": False, "error": "token audiences is invalid"}}
        pod_name = token.removeprefix("tok-")
        uid = self.pods[pod_name]["metadata"]["uid"]
        return {
            "status": {
                "authenticated": True,
                "audiences": [audience],
                "user": {
                    "username": f"system:serviceaccount:{NS}:default",
                    "uid": "sa-uid",
                    "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
                    "extra": {
                        "authentication.kubernetes.io/pod-name": [pod_name],
                        "authentication.kubernetes.io/pod-uid": [uid],
                    },
                },
            }
        }

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name) if namespace == NS else None

    async def apply(self, namespace: str, name: str, trainer_status: dict[str, Any]) -> dict[str, Any]:
        if name not in self.trainjobs:
            raise NotFound(f'trainjobs.trainer.kubeflow.org "{name}" not found', code=404)
        self.applied.append((namespace, name, trainer_status))
        return {"status": {"trainerStatus": trainer_status} if self.crd_has_trainer_status else {}}


def body(**status: Any) -> bytes:
    return json.dumps(
        {"trainerStatus": {"lastUpdatedTime": "2026-12-01T10:25:00.123456+00:00", **status}}
    ).encode()


def make(api: FakeAPI, clock: FakeClock | None = None, rate: float = 1.0, burst: int = 10) -> ProgressHandler:
    clock = clock or FakeClock()
    return ProgressHandler(
        DelegatingAuth(api, clock=clock, retry_delays=()),
        api.get_pod,
        api.apply,
        UpdateRateLimiter(rate=rate, burst=burst, clock=clock),
    )


async def test_update_from_a_pod_of_the_trainjob_lands_with_upstream_field_names() -> None:
    api = FakeAPI()
    code, answer = await make(api).handle(
        NS,
        "job1",
        "Bearer tok-job1-node-0-0",
        body(
            progressPercentage=42, estimatedRemainingSeconds=300, metrics=[{"name": "loss", "value": "0.25"}]
        ),
    )
    assert code == 200, answer
    expected = {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 300,
        "metrics": [{"name": "loss", "value": "0.25"}],
        "lastUpdatedTime": "2026-12-01T10:25:00Z",
    }
    assert api.applied == [(NS, "job1", expected)]
    assert answer == {"trainerStatus": expected}
    # the TokenReview asked for this TrainJob's audience
    assert api.reviews[0]["spec"]["audiences"] == [
        "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/job1/status"
    ]


@pytest.mark.parametrize(
    ("authorization", "code", "needle"),
    [
        ("", 401, "Bearer token is required"),
        ("Basic abc", 401, "Bearer token is required"),
        ("Bearer not-a-token", 401, "not valid"),
        # a pod of job2 holds a token for job2's audience: not valid for job1's
        ("Bearer tok-job2-node-0-0", 401, "not valid"),
        # a pod labelled as job1 but not created by a Job of it
        ("Bearer tok-stray", 403, "does not belong to TrainJob team-a/job1"),
    ],
)
async def test_auth_failures(authorization: str, code: int, needle: str) -> None:
    api = FakeAPI()
    got, answer = await make(api).handle(NS, "job1", authorization, body(progressPercentage=1))
    assert got == code
    assert answer["kind"] == "Status" and answer["code"] == code and needle in answer["message"]
    assert api.applied == []


async def test_token_of_another_trainjobs_pod_is_forbidden_even_with_the_right_audience() -> None:
    """A token whose audience names job1 but that is bound to a pod of job2 gets a 403."""
    api = FakeAPI()
    api.audience_of["tok-job2-node-0-0"] = "job1"
    code, answer = await make(api).handle(NS, "job1", "Bearer tok-job2-node-0-0", body(progressPercentage=5))
    assert code == 403
    assert answer["reason"] == "Forbidden"
    assert "pod team-a/job2-node-0-0 does not belong to TrainJob team-a/job1" in answer["message"]
    assert api.applied == []


async def test_deleted_pod_or_reused_name_is_forbidden() -> None:
    api = FakeAPI()
    api.pods["job1-node-0-0"]["metadata"]["uid"] = "someone-else"
    api.audience_of["tok-job1-node-0-0"] = "job1"
    handler = make(api)
    api_create = api.create

    async def stale_uid(obj: dict[str, Any]) -> dict[str, Any]:
        review = await api_create(obj)
        review["status"]["user"]["extra"]["authentication.kubernetes.io/pod-uid"] = ["uid-1"]
        return review

    api.create = stale_uid  # type: ignore[method-assign]
    code, answer = await handler.handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=5))
    assert code == 403 and "does not exist" in answer["message"]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"not json", "body: Invalid value: request body is not valid JSON"),
        (b"[1, 2]", "body: Invalid value: must be a JSON object"),
        (b'{"progress": 5}', 'progress: unknown field "progress"'),
        (b'{"trainerStatus": 5}', "trainerStatus: Invalid value: must be an object"),
        (b'{"trainerStatus": {"progressPercentage": 5}}', "trainerStatus.lastUpdatedTime: Required value"),
        (
            body(progressPercentage=101),
            "trainerStatus.progressPercentage: Invalid value: 101: must be between 0 and 100",
        ),
        (
            body(progressPercentage="50"),
            'trainerStatus.progressPercentage: Invalid value: "50": must be an integer',
        ),
        (
            body(progressPercentage=True),
            "trainerStatus.progressPercentage: Invalid value: true: must be an integer",
        ),
        (body(estimatedRemainingSeconds=-1), "trainerStatus.estimatedRemainingSeconds: Invalid value: -1"),
        (
            body(estimatedRemainingSeconds=2**31),
            "trainerStatus.estimatedRemainingSeconds: Invalid value: 2147483648",
        ),
        (body(metrics={"loss": 1}), "trainerStatus.metrics: Invalid value: must be a list"),
        (
            body(metrics=[{"name": "loss", "value": 0.5}]),
            "trainerStatus.metrics[0].value: Invalid value: 0.5: must be a string",
        ),
        (
            body(metrics=[{"name": "", "value": "1"}]),
            'trainerStatus.metrics[0].name: Invalid value: "": must be 1 to 64',
        ),
        (body(metrics=[{"name": "x" * 65, "value": "1"}]), "trainerStatus.metrics[0].name: Invalid value"),
        (
            body(metrics=[{"name": "a", "value": "1", "unit": "s"}]),
            'trainerStatus.metrics[0].unit: unknown field "unit"',
        ),
        (
            body(metrics=[{"name": f"m{i}", "value": "1"} for i in range(257)]),
            "trainerStatus.metrics: Too many: 257",
        ),
        (body(lastUpdatedTime="yesterday"), 'trainerStatus.lastUpdatedTime: Invalid value: "yesterday"'),
        (body(lastUpdatedTime="2026-12-01T10:25:00"), "must be an RFC 3339 time with a time zone"),
        (body(epoch=3), 'trainerStatus.epoch: unknown field "epoch"'),
    ],
)
async def test_garbage_bodies_are_400_naming_the_field(raw: bytes, field: str) -> None:
    api = FakeAPI()
    code, answer = await make(api).handle(NS, "job1", "Bearer tok-job1-node-0-0", raw)
    assert code == 400, answer
    assert answer["reason"] == "BadRequest"
    assert field in answer["message"]
    assert api.applied == []


def test_parse_update_accepts_what_the_sdk_sends() -> None:
    # kubeflow 0.5.0 update_trainjob_status(): datetime.now(timezone.utc).isoformat(), str values
    sent = {
        "trainerStatus": {
            "lastUpdatedTime": "2026-12-01T10:25:00.654321+00:00",
            "progressPercentage": 100,
            "estimatedRemainingSeconds": 0,
            "metrics": [{"name": "loss", "value": "0.1"}, {"name": "epoch", "value": "3"}],
        }
    }
    assert parse_update(json.dumps(sent).encode()) == {
        "progressPercentage": 100,
        "estimatedRemainingSeconds": 0,
        "metrics": [{"name": "loss", "value": "0.1"}, {"name": "epoch", "value": "3"}],
        "lastUpdatedTime": "2026-12-01T10:25:00Z",
    }
    assert parse_update(b"{}") is None
    assert parse_update(b'{"trainerStatus": null}') is None


async def test_missing_trainjob_is_404_and_old_crd_is_a_clear_500() -> None:
    api = FakeAPI()
    api.trainjobs = {"job2"}
    code, answer = await make(api).handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=1))
    assert code == 404 and answer["message"] == "Train job team-a/job1 not found"
    api.trainjobs = {"job1"}
    api.crd_has_trainer_status = False
    code, answer = await make(api).handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=1))
    assert code == 500 and "config/progress/crd" in answer["message"]


async def test_api_server_rejection_is_400_other_errors_500() -> None:
    api = FakeAPI()

    async def invalid(*_args: Any) -> dict[str, Any]:
        raise ApiError("status.trainerStatus.metrics: Too many", code=422)

    handler = make(api)
    handler.apply = invalid
    code, answer = await handler.handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=1))
    assert code == 400 and "Too many" in answer["message"]

    async def broken(*_args: Any) -> dict[str, Any]:
        raise ApiError("etcd is sad", code=503)

    handler.apply = broken
    code, answer = await handler.handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=1))
    assert code == 500 and answer["message"] == "Internal error"


async def test_rate_limit_per_trainjob_429_then_recovers() -> None:
    api = FakeAPI()
    clock = FakeClock()
    handler = make(api, clock, rate=1.0, burst=3)
    codes = [
        (await handler.handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=i)))[0]
        for i in range(5)
    ]
    assert codes == [200, 200, 200, 429, 429]
    code, answer = await handler.handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=9))
    assert answer["reason"] == "TooManyRequests" and answer["retryAfterSeconds"] == 1
    # another TrainJob has its own bucket
    code, _ = await handler.handle(NS, "job2", "Bearer tok-job2-node-0-0", body(progressPercentage=1))
    assert code == 200
    await clock.advance(1.0)
    code, _ = await handler.handle(NS, "job1", "Bearer tok-job1-node-0-0", body(progressPercentage=10))
    assert code == 200
    assert len(api.applied) == 5
    # one TokenReview per token per minute, not one per update
    assert len(api.reviews) == 2


async def test_memory_stays_flat_over_10000_updates() -> None:
    """10,000 updates over 500 TrainJobs: limiter and token caches stay bounded, no growth."""
    api = FakeAPI()
    clock = FakeClock()
    handler = make(api, clock, rate=1000.0, burst=1000)
    handler.limiter.size = 64
    handler.auth.tokens.size = 64

    async def trainjob_pod(i: int) -> None:
        name = f"tj{i % 500}"
        api.trainjobs.add(name)
        pod_name = f"{name}-node-0-0"
        api.pods.setdefault(pod_name, pod(pod_name, f"uid-{name}", name))
        api.audience_of[f"tok-{pod_name}"] = name
        code, answer = await handler.handle(
            NS,
            name,
            f"Bearer tok-{pod_name}",
            body(progressPercentage=i % 101, metrics=[{"name": "step", "value": str(i)}]),
        )
        assert code == 200, answer
        api.applied.clear()
        api.reviews.clear()

    for i in range(1000):  # warm up: every TrainJob seen, caches full
        await trainjob_pod(i)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(10_000):
        await trainjob_pod(i)
        if i % 100 == 0:
            await clock.advance(0.01)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    print(f"tracemalloc growth over 10,000 updates: {growth} bytes")
    assert growth < 256 * 1024, f"memory grew by {growth} bytes over 10,000 updates"
    assert len(handler.limiter) <= 64 and len(handler.auth.tokens) <= 64


async def test_https_server_routes_and_answers_json(tmp_path: Any) -> None:
    """The real listener: TLS, upstream's path, JSON Status errors, 404 elsewhere."""
    cert, key = self_signed_pair()
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    api = FakeAPI()
    server = StatusServer(make(api), host="127.0.0.1", port=0, cert_dir=tmp_path)
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    client_ctx = ssl.create_default_context(cadata=cert.decode())
    base = f"https://localhost:{server.bound_port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(
                base + status_path(NS, "job1"),
                data=body(progressPercentage=7),
                headers={"Authorization": "Bearer tok-job1-node-0-0", "Content-Type": "application/json"},
                ssl=client_ctx,
            ) as resp:
                assert resp.status == 200
                assert (await resp.json())["trainerStatus"]["progressPercentage"] == 7
            async with session.post(base + status_path(NS, "job1"), data=b"{}", ssl=client_ctx) as resp:
                assert resp.status == 401
                assert (await resp.json())["kind"] == "Status"
            async with session.post(base + "/elsewhere", ssl=client_ctx) as resp:
                assert resp.status == 404
            async with session.post(
                base + status_path(NS, "job1"),
                data=b"x" * (70 * 1024),
                headers={"Authorization": "Bearer tok-job1-node-0-0"},
                ssl=client_ctx,
            ) as resp:
                assert resp.status == 413
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_plugin_injects_upstream_env_volume_and_builds_ca_config_map() -> None:
    settings = StatusServerSettings(
        service_name="svc", namespace="kubeflow-system", port=10443, secret_name="s"
    )
    trainjob = TrainJob.from_dict(
        {
            "metadata": {"name": "job1", "namespace": NS, "uid": "tj-uid"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    )
    node = ContainerInfo(name="node")
    info = Info(
        template_spec=TemplateSpec(pod_sets=[PodSet(name="node", ancestor="trainer", containers=[node])])
    )

    class Reader:
        async def get(self, gvk: Any, name: str, namespace: str = "") -> dict[str, Any]:
            assert (gvk.kind, namespace, name) == ("Secret", "kubeflow-system", "s")
            return {"data": {"ca.crt": "LS0tLS1CRUdJTg=="}}

    plugin = TrainJobStatus(PluginContext(reader=Reader()), settings)  # type: ignore[arg-type]
    plugin.enforce_ml_policy(info, trainjob)
    assert {e["name"]: e["value"] for e in node.env} == {
        "KUBEFLOW_TRAINER_SERVER_URL": "https://svc.kubeflow-system.svc:10443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/job1/status",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/var/run/secrets/kubeflow/trainer/token",
    }
    assert node.volume_mounts == [
        {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer", "readOnly": True}
    ]
    (volume,) = info.template_spec.pod_sets[0].volumes
    token, config_map = volume["projected"]["sources"]
    assert token["serviceAccountToken"] == {
        "audience": "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/job1/status",
        "expirationSeconds": 3600,
        "path": "token",
    }
    assert config_map["configMap"] == {
        "name": "job1-tls-config",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    (built,) = asyncio.run(plugin.build(info, trainjob))
    assert built["metadata"]["name"] == "job1-tls-config"
    assert built["data"] == {"ca.crt": "-----BEGIN"}
    assert built["metadata"]["ownerReferences"][0]["uid"] == "tj-uid"


def test_plugin_is_registered_only_with_the_gate_on() -> None:
    assert "TrainJobStatus" not in new_registry()
    with features.override(features.TrainJobStatus, True):
        names = list(new_registry())
    assert names.index("TrainJobStatus") == names.index("JobSet") - 1


def test_gate_off_means_no_status_server_and_no_injection() -> None:
    """With TrainJobStatus off (the default) the manager builds no status server at all."""
    from trainer.__main__ import status_server
    from trainer.api.config_v1alpha1 import load

    features.reset()
    assert status_server(object(), object(), load({}), ["trainer"]) == ()  # type: ignore[arg-type]
    assert "TrainJobStatus" not in new_registry()
