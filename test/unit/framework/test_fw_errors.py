"""The exception tree: one root, client (4xx) and server (5xx, 429) answers apart, no-answer apart,
and AlreadyExists not mistaken for a Conflict by the retry helper."""

from __future__ import annotations

from typing import Any

import pytest

import manager
from manager.client import errors
from manager.client.restmapper import NoKindMatch
from manager.config import RestConfigError
from manager.controller.reconcile import is_routine
from manager.controller_util import RetryBackoff, retry_on_conflict
from manager.events import EventRecorder
from manager.scheme import GroupVersionKind
from manager.testing.fake import FakeClient

CM = GroupVersionKind("", "v1", "ConfigMap")


@pytest.mark.parametrize(
    ("code", "reason", "expected", "side"),
    [
        (400, "BadRequest", errors.BadRequest, errors.ClientError),
        (401, "Unauthorized", errors.Unauthorized, errors.ClientError),
        (403, "Forbidden", errors.Forbidden, errors.ClientError),
        (404, "NotFound", errors.NotFound, errors.ClientError),
        (405, "MethodNotAllowed", errors.MethodNotAllowed, errors.ClientError),
        (409, "Conflict", errors.Conflict, errors.ClientError),
        (409, "AlreadyExists", errors.AlreadyExists, errors.ClientError),
        (410, "Expired", errors.Gone, errors.ClientError),
        (422, "Invalid", errors.Invalid, errors.ClientError),
        (418, "", errors.ClientError, errors.ClientError),
        (429, "TooManyRequests", errors.TooManyRequests, errors.ServerError),
        (500, "InternalError", errors.InternalError, errors.ServerError),
        (502, "", errors.ServerError, errors.ServerError),
        (503, "ServiceUnavailable", errors.ServiceUnavailable, errors.ServerError),
        (504, "Timeout", errors.Timeout, errors.ServerError),
    ],
)
def test_status_maps_to_one_class_on_one_side(
    code: int, reason: str, expected: type[errors.ApiError], side: type[errors.ApiError]
) -> None:
    err = errors.ApiError.from_status(code, {"code": code, "reason": reason, "message": "m"})
    assert type(err) is expected
    assert isinstance(err, side)
    other = errors.ServerError if side is errors.ClientError else errors.ClientError
    assert not isinstance(err, other)
    assert isinstance(err, errors.RequestError) and isinstance(err, manager.Error)
    assert err.status_code == code and err.message == "m"


def test_already_exists_is_not_a_conflict() -> None:
    exists = errors.ApiError.from_status(409, {"reason": "AlreadyExists", "message": "taken"})
    assert isinstance(exists, errors.AlreadyExists)
    assert not isinstance(exists, errors.Conflict)
    stale = errors.ApiError.from_status(409, {"reason": "Conflict", "message": "modified"})
    assert not isinstance(stale, errors.AlreadyExists)


def test_transport_error_is_a_request_error_but_not_an_api_error() -> None:
    err = errors.TransportError("GET /api: connection refused")
    assert isinstance(err, errors.RequestError) and isinstance(err, manager.Error)
    assert not isinstance(err, errors.ApiError)
    assert is_routine(err)  # retried with back-off by the controller, no traceback


def test_framework_errors_share_the_root() -> None:
    assert isinstance(NoKindMatch(CM), manager.Error) and isinstance(NoKindMatch(CM), LookupError)
    assert isinstance(RestConfigError("no kubeconfig"), manager.Error)
    assert isinstance(manager.TerminalError(ValueError("x")), manager.Error)
    assert not isinstance(TypeError("a bug"), manager.Error)


async def test_retry_on_conflict_does_not_retry_already_exists() -> None:
    c = FakeClient()
    calls = 0

    async def create() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        result: dict[str, Any] = await c.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}
        )
        return result

    await create()
    with pytest.raises(errors.AlreadyExists):
        await retry_on_conflict(create, RetryBackoff(steps=5, duration=0.001))
    assert calls == 2  # the first create, then one attempt: a taken name is not retried


async def test_event_recorder_drops_an_event_the_server_never_answered() -> None:
    c = FakeClient()
    c.inject_error("create", errors.TransportError("POST events: connection reset"))
    recorder = EventRecorder(c, component="test")
    involved = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
    }
    assert await recorder.event(involved, "Normal", "Synced", "done") is None
    assert await recorder.event(involved, "Normal", "Synced", "done") is not None
