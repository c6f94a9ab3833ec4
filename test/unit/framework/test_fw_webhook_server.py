"""The webhook server over real TLS on loopback: AdmissionReview round trips, TLS settings,
metrics, bad requests, handler failures and certificate hot reload."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from manager.envtest.certs import TinyCA
from manager.webhook import (
    INTERNAL_ERROR_MESSAGE,
    AdmissionRequest,
    AdmissionResponse,
    Denied,
    WebhookServer,
    defaulting_handler,
    validating_handler,
)
from manager.webhook import metrics as webhook_metrics
from manager.webhook.jsonpatch import apply
from manager.webhook.server import GIL_SWITCH_INTERVAL


class Defaulter:
    async def default(self, obj: dict[str, Any]) -> None:
        obj.setdefault("spec", {}).setdefault("color", "red")
        obj["metadata"].setdefault("labels", {})["defaulted"] = "true"


class Validator:
    async def validate_create(self, obj: dict[str, Any]) -> list[str] | None:
        if obj["spec"].get("size", 0) > 5:
            raise Denied("spec.size: must be at most 5", warnings=["size is large"])
        return ["created ok"]

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str] | None:
        if old["spec"] != new["spec"]:
            raise Denied("spec is immutable")
        return None

    async def validate_delete(self, obj: dict[str, Any]) -> list[str] | None:
        return None


async def boom(req: AdmissionRequest) -> AdmissionResponse:
    raise RuntimeError("bug in handler")


def review(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
            "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
            "operation": operation,
            "object": obj,
            "oldObject": old,
        },
    }


def obj(size: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": size},
    }


class Served:
    def __init__(self, server: WebhookServer, ca: TinyCA, cert_dir: Path) -> None:
        self.server = server
        self.ca = ca
        self.cert_dir = cert_dir
        self.url = f"https://127.0.0.1:{server.bound_port}"

    def client_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        return ctx

    async def post(self, path: str, body: Any, *, content_type: str = "application/json") -> tuple[int, Any]:
        import json

        data = body if isinstance(body, bytes) else json.dumps(body)
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.client_context())) as s,
            s.post(self.url + path, data=data, headers={"Content-Type": content_type}) as r,
        ):
            text = await r.text()
            return r.status, (json.loads(text) if r.content_type == "application/json" else text)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    ca = TinyCA("webhook-test-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path, cert_poll_interval=0.05)
    server.register("/mutate", defaulting_handler(Defaulter()))
    server.register("/validate", validating_handler(Validator()))
    server.register("/boom", boom)
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield Served(server, ca, tmp_path)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_defaulter_answers_a_json_patch_and_echoes_uid(served: Served) -> None:
    body = review("CREATE", obj())
    status, answer = await served.post("/mutate", body)
    assert status == 200
    resp = answer["response"]
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert resp["uid"] == body["request"]["uid"]
    assert resp["allowed"] is True
    assert resp["patchType"] == "JSONPatch"
    import json

    patch = json.loads(base64.b64decode(resp["patch"]))
    patched = apply(obj(), patch)
    assert patched["spec"]["color"] == "red"
    assert patched["metadata"]["labels"] == {"defaulted": "true"}
    # DELETE is not defaulted
    status, answer = await served.post("/mutate", review("DELETE", None, obj()))
    assert answer["response"] == {"uid": answer["response"]["uid"], "allowed": True}


async def test_validator_allows_denies_and_warns(served: Served) -> None:
    _, ok = await served.post("/validate", review("CREATE", obj(3)))
    assert ok["response"]["allowed"] is True
    assert ok["response"]["warnings"] == ["created ok"]
    _, no = await served.post("/validate", review("CREATE", obj(9)))
    assert no["response"]["allowed"] is False
    assert no["response"]["status"]["code"] == 403
    assert no["response"]["status"]["message"] == "spec.size: must be at most 5"
    assert no["response"]["warnings"] == ["size is large"]  # warnings even on denial
    _, upd = await served.post("/validate", review("UPDATE", obj(4), obj(3)))
    assert upd["response"]["allowed"] is False and "immutable" in upd["response"]["status"]["message"]
    _, conn = await served.post("/validate", review("CONNECT", None))
    assert conn["response"]["allowed"] is True


def refusal(answer: Any) -> tuple[int, str]:
    """An unreadable request's answer: an AdmissionReview without apiVersion/kind or uid (Go's)."""
    assert set(answer) == {"response"}, answer
    response = answer["response"]
    assert response["uid"] == "" and response["allowed"] is False, response
    return response["status"]["code"], response["status"]["message"]


async def test_bad_requests_and_failing_handler(served: Served) -> None:
    # controller-runtime answers requests it cannot read with HTTP 200 and the code in the review
    status, answer = await served.post("/validate", review("CREATE", obj()), content_type="text/plain")
    assert status == 200
    assert refusal(answer) == (400, "contentType=text/plain, expected application/json")
    status, answer = await served.post("/validate", b"")
    assert status == 200 and refusal(answer) == (400, "request body is empty")
    status, answer = await served.post("/validate", [1])
    code, message = refusal(answer)
    assert code == 400 and message.startswith(
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct"
    )
    status, answer = await served.post("/validate", b"{not json")
    code, message = refusal(answer)
    assert code == 400 and message.startswith("couldn't get version/kind; json parse error: ")
    panics = webhook_metrics.WEBHOOK_PANICS._value.get()
    status, answer = await served.post("/boom", review("CREATE", obj()))
    assert status == 200
    assert answer["response"]["allowed"] is False and answer["response"]["status"]["code"] == 500
    # a generic text: the exception stays in the log
    assert answer["response"]["status"]["message"] == INTERNAL_ERROR_MESSAGE
    assert "bug in handler" not in str(answer)
    assert webhook_metrics.WEBHOOK_PANICS._value.get() == panics + 1
    # the server still answers after a handler failure
    _, ok = await served.post("/validate", review("CREATE", obj()))
    assert ok["response"]["allowed"] is True
    # the HTTP code is what the metric counts, as controller-runtime's promhttp instrumentation
    assert webhook_metrics.WEBHOOK_REQUESTS.labels(webhook="/validate", code="200")._value.get() >= 5
    assert webhook_metrics.WEBHOOK_REQUESTS.labels(webhook="/validate", code="200")._value.get() >= 1
    assert served.server.started_checker()() is True


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            {"uid": 5},
            "json: cannot unmarshal number into Go struct field AdmissionRequest.request.uid of type types.UID",
        ),
        (
            {"uid": "u", "kind": "Pod"},
            "json: cannot unmarshal string into Go struct field AdmissionRequest.request.kind of type v1.GroupVersionKind",
        ),
        (
            {"uid": "u", "kind": {"kind": ["x"]}},
            "json: cannot unmarshal array into Go struct field GroupVersionKind.request.kind.kind of type string",
        ),
        (
            {"uid": "u", "operation": {}},
            "json: cannot unmarshal object into Go struct field AdmissionRequest.request.operation of type v1.Operation",
        ),
        (
            {"uid": "u", "dryRun": "yes"},
            "json: cannot unmarshal string into Go struct field AdmissionRequest.request.dryRun of type bool",
        ),
        (
            {"uid": "u", "userInfo": {"groups": [1]}},
            "json: cannot unmarshal number into Go struct field UserInfo.request.userInfo.groups of type string",
        ),
        (
            {"uid": "u", "userInfo": {"extra": {"a": "b"}}},
            "json: cannot unmarshal string into Go struct field UserInfo.request.userInfo.extra of type v1.ExtraValue",
        ),
        (
            "req",
            "json: cannot unmarshal string into Go struct field unversionedAdmissionReview.request of type v1.AdmissionRequest",
        ),
    ],
)
async def test_ill_typed_envelope_is_answered_400_with_go_words(
    served: Served, request_: Any, message: str
) -> None:
    status, answer = await served.post(
        "/validate", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request_}
    )
    assert status == 200 and refusal(answer) == (400, message)


async def test_envelope_without_request_reaches_the_handler_as_go_does(served: Served) -> None:
    # no request: the handler sees an empty one (operation "" is unknown to a validator)
    status, answer = await served.post(
        "/validate", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    )
    assert status == 200
    assert answer["response"]["status"] == {
        "code": 400,
        "message": 'unknown operation ""',
        "status": "Failure",
    }


async def test_body_at_the_size_limit_is_refused_413(served: Served) -> None:
    from manager.webhook.server import MAX_BODY

    small = review("CREATE", obj())
    pad = MAX_BODY - len(json.dumps(small).encode())
    # exactly the limit is refused (controller-runtime's LimitedReader stops at N == 0)
    at_limit = review("CREATE", {**obj(), "pad": "x" * (pad - len(', "pad": ""'))})
    body = json.dumps(at_limit).encode()
    assert len(body) == MAX_BODY
    status, answer = await served.post("/validate", body)
    assert status == 200 and refusal(answer) == (
        413,
        f"request entity is too large; limit is {MAX_BODY} bytes",
    )
    # one byte less is read and handled
    under = json.dumps(review("CREATE", {**obj(), "pad": "x" * (pad - len(', "pad": ""') - 1)})).encode()
    assert len(under) == MAX_BODY - 1
    status, answer = await served.post("/validate", under)
    assert status == 200 and answer["response"]["allowed"] is True
    # the server keeps serving on fresh connections
    _, ok = await served.post("/validate", small)
    assert ok["response"]["allowed"] is True


async def test_tls_is_1_2_plus_and_http1_only(served: Served) -> None:
    # The client's OpenSSL may refuse TLS 1.1 on its own, so check the server's floor directly
    # and that a TLS 1.2-only client is served.
    assert served.server.certwatcher is not None
    assert served.server.certwatcher.context.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = served.client_context()
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    _, w12 = await asyncio.open_connection(
        "127.0.0.1", served.server.bound_port, ssl=tls12, server_hostname="localhost"
    )
    assert w12.get_extra_info("ssl_object").version() == "TLSv1.2"
    w12.close()
    await w12.wait_closed()
    ctx = served.client_context()
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", served.server.bound_port, ssl=ctx, server_hostname="localhost"
    )
    try:
        ssl_obj = writer.get_extra_info("ssl_object")
        assert ssl_obj.selected_alpn_protocol() == "http/1.1"
        assert ssl_obj.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        writer.close()
        await writer.wait_closed()
    assert reader is not None


async def _served_cert_serial(served: Served) -> int:
    from cryptography import x509

    ctx = served.client_context()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", served.server.bound_port, ssl=ctx, server_hostname="localhost"
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    del reader
    return x509.load_der_x509_certificate(der).serial_number


async def test_certificate_hot_reload(served: Served) -> None:
    from cryptography import x509

    from manager.testing.eventually import eventually

    first = await _served_cert_serial(served)
    reads = webhook_metrics.CERT_READS._value.get()
    served.ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        served.cert_dir / "tls.crt", served.cert_dir / "tls.key"
    )
    new_serial = x509.load_pem_x509_certificate((served.cert_dir / "tls.crt").read_bytes()).serial_number
    assert new_serial != first

    async def serves_new() -> bool:
        return await _served_cert_serial(served) == new_serial

    await eventually(serves_new, timeout=10, interval=0.05)
    assert webhook_metrics.CERT_READS._value.get() >= reads + 1
    # A broken file keeps the previous pair and counts an error.
    errors = webhook_metrics.CERT_READ_ERRORS._value.get()
    (served.cert_dir / "tls.key").write_text("garbage")
    await eventually(
        lambda: webhook_metrics.CERT_READ_ERRORS._value.get() > errors, timeout=10, interval=0.05
    )
    assert await _served_cert_serial(served) == new_serial


def test_duplicate_path_is_refused() -> None:
    from manager.webhook.server import WebhookServerError

    server = WebhookServer()
    server.register("/x", boom)
    with pytest.raises(WebhookServerError):
        server.register("/x", boom)


async def test_client_ca_requires_a_client_certificate(tmp_path: Path) -> None:
    serving_ca = TinyCA("serving")
    client_ca = TinyCA("clients")
    serving_ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    (tmp_path / "client-ca.crt").write_bytes(client_ca.cert_pem)
    client_ca.issue_client("apiserver").write(tmp_path / "client.crt", tmp_path / "client.key")
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path, client_ca_name="client-ca.crt")
    server.register("/validate", validating_handler(Validator()))
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    try:
        url = f"https://127.0.0.1:{server.bound_port}/validate"
        anonymous = ssl.create_default_context(cadata=serving_ca.cert_pem.decode())
        with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=anonymous)) as s,
                s.post(url, json=review("CREATE", obj())) as r,
            ):
                await r.read()
        authenticated = ssl.create_default_context(cadata=serving_ca.cert_pem.decode())
        authenticated.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=authenticated)) as s,
            s.post(url, json=review("CREATE", obj())) as r,
        ):
            assert r.status == 200
            assert (await r.json())["response"]["allowed"] is True
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_missing_certificate_is_a_clear_error(tmp_path: Path) -> None:
    from manager.webhook.server import WebhookServer, WebhookServerError

    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    with pytest.raises(WebhookServerError, match=r"tls\.crt does not exist"):
        await server.start(asyncio.Event())
    assert server.paths == []


async def test_only_denied_denies_a_value_error_is_an_internal_error() -> None:
    # a ValueError is a bug in the validator (e.g. int() of a field), not a verdict on the object
    class Buggy:
        async def validate_create(self, obj: dict[str, Any]) -> list[str] | None:
            raise ValueError("invalid literal for int() with base 10: 'x'")

        async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str] | None:
            raise Denied("spec is immutable", warnings=["think again"])

        async def validate_delete(self, obj: dict[str, Any]) -> list[str] | None:
            return None

    handle = validating_handler(Buggy())
    request = AdmissionRequest(uid="u", kind={}, resource={}, operation="CREATE", object=obj())
    buggy = await handle(request)
    assert (buggy.allowed, buggy.code, buggy.message) == (False, 500, INTERNAL_ERROR_MESSAGE)
    request.operation, request.old_object = "UPDATE", obj()
    denied = await handle(request)
    assert (denied.allowed, denied.code, denied.reason) == (False, 403, "Forbidden")
    assert denied.message == "spec is immutable" and denied.warnings == ["think again"]


def test_json_copy_copies_documents_deeper_than_orjson_accepts() -> None:
    # A Pod nested 600 levels deep is valid JSON Go decodes; orjson stops at 254 levels, and the
    # webhooks' copy must not turn that into a 500 (found by the admission fuzzer).
    import sys

    from manager.meta.object import json_copy

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # as the webhook server runs
    try:
        doc: dict[str, object] = {"leaf": True}
        for _ in range(600):
            doc = {"a": doc}
        copied = json_copy(doc)
        assert copied == doc and copied is not doc
    finally:
        sys.setrecursionlimit(limit)


def test_the_default_certificate_directory_is_gos_temp_dir_found_without_writing(tmp_path: Path) -> None:
    """controller-runtime's default under Go's os.TempDir(): $TMPDIR as given, else /tmp, found
    without touching the disk. The console script imports it; the Helm chart's hook pod runs it
    on a read-only root with no /tmp volume, where tempfile.gettempdir() (which writes a probe
    file into each candidate) raised "No usable temporary directory" at import."""
    code = "from manager.webhook.server import DEFAULT_CERT_DIR; print(DEFAULT_CERT_DIR)"
    missing = tmp_path / "no-such-directory"
    environ = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    for tmpdir, expected in ((str(missing), missing), (None, Path("/tmp"))):
        env = environ if tmpdir is None else {**environ, "TMPDIR": tmpdir}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(expected / "k8s-webhook-server" / "serving-certs")
    assert not missing.exists()


def _post_blocking(served: Served, path: str, body: Any) -> tuple[float, dict[str, Any]]:
    """One AdmissionReview sent from a plain thread: when its answer arrived, and the answer."""
    import http.client

    conn = http.client.HTTPSConnection(
        "127.0.0.1", served.server.bound_port, context=served.client_context(), timeout=30
    )
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    return time.monotonic(), answer


async def test_answers_while_the_managers_loop_is_busy(served: Served) -> None:
    # design rule (docs/behaviour/framework.md D.5): an admission answer never waits behind the
    # loop that runs the reconcilers. The host loop is held by a long synchronous step here.
    answered: list[tuple[float, dict[str, Any]]] = []
    arrived = threading.Event()
    body = review("CREATE", obj(size=9))

    def send() -> None:
        answered.append(_post_blocking(served, "/validate", body))
        arrived.set()

    sender = threading.Thread(target=send)
    sender.start()
    # blocks the host loop on purpose (nothing else runs on it) until the answer is in
    in_time = arrived.wait(timeout=20)
    released = time.monotonic()
    await asyncio.to_thread(sender.join)
    assert in_time, "no answer within 20 s while the host loop was blocked"
    at, answer = answered[0]
    assert at <= released
    resp = answer["response"]
    assert resp["uid"] == body["request"]["uid"]
    assert (resp["allowed"], resp["status"]["code"]) == (False, 403)
    assert resp["status"]["message"] == "spec.size: must be at most 5"


async def test_stopping_ends_the_server_thread_and_frees_the_port(tmp_path: Path) -> None:
    ca = TinyCA("webhook-test-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    server.register("/validate", validating_handler(Validator()))
    before = set(threading.enumerate())
    interval = sys.getswitchinterval()
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    assert server.started_checker()()
    # the server's thread waits for the GIL at most 1 ms while it serves (Python's default: 5 ms)
    assert sys.getswitchinterval() == pytest.approx(min(interval, GIL_SWITCH_INTERVAL))
    port = server.bound_port
    assert port is not None
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not server.started_checker()()
    assert sys.getswitchinterval() == pytest.approx(interval)
    assert set(threading.enumerate()) <= before
    with socket.socket() as sock:  # nothing listens there any more
        assert sock.connect_ex(("127.0.0.1", port)) != 0


async def test_own_thread_false_serves_on_the_callers_loop(tmp_path: Path) -> None:
    ca = TinyCA("webhook-test-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    seen: list[int] = []

    async def handler(req: AdmissionRequest) -> AdmissionResponse:
        seen.append(threading.get_ident())
        return AdmissionResponse(True)

    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path, own_thread=False)
    server.register("/validate", handler)
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    try:
        status, answer = await Served(server, ca, tmp_path).post("/validate", review("CREATE", obj()))
        assert status == 200 and answer["response"]["allowed"] is True
        assert seen == [threading.get_ident()]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
