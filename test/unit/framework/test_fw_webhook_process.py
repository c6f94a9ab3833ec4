"""The webhook process (``manager.webhook.process``): a real child process on socket pairs.

The child is ``webhook_child.py``: a ``ParentLink`` around a server that only says it listens,
with one relayed counter; its flags make it end at once, end after serving, or ignore SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from manager.webhook.process import (
    CHILD_FDS_FLAG,
    RelayCollector,
    WebhookProcess,
    WebhookProcessError,
    relay_metrics,
)

CHILD = [sys.executable, str(Path(__file__).with_name("webhook_child.py"))]


def child(*flags: str, stop_timeout: float = 25.0) -> WebhookProcess:
    return WebhookProcess([*CHILD, *flags], stop_timeout=stop_timeout)


async def started(process: WebhookProcess) -> tuple[asyncio.Task[None], asyncio.Event]:
    ready = asyncio.Event()
    task = asyncio.create_task(process.start(ready))
    done, _ = await asyncio.wait(
        [task, asyncio.create_task(ready.wait())], timeout=30, return_when="FIRST_COMPLETED"
    )
    assert ready.is_set(), f"the child never said it serves: {[t.exception() for t in done if t is task]}"
    return task, ready


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_started_once_the_child_serves_and_the_relayed_metrics_add_to_the_managers() -> None:
    process = child("--answered", "3")
    assert not process.started_checker()()
    task, _ = await started(process)
    try:
        assert process.started_checker()()
        registry = CollectorRegistry()
        local = Counter(
            "controller_runtime_webhook_requests", "requests", ["webhook", "code"], registry=registry
        )
        local.labels("/validate", "200").inc(2)
        local.labels("/mutate", "200").inc(1)
        with relay_metrics(registry, [local], process.fetch_metrics):
            exposed = samples((await asyncio.to_thread(generate_latest, registry)).decode())
        validate = ("controller_runtime_webhook_requests_total", (("code", "200"), ("webhook", "/validate")))
        mutate = ("controller_runtime_webhook_requests_total", (("code", "200"), ("webhook", "/mutate")))
        assert exposed[validate] == 5.0  # 2 here + 3 in the child
        assert exposed[mutate] == 1.0
        # closed: the manager's own collector is back, alone
        assert samples(generate_latest(registry).decode())[validate] == 2.0
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert process.pid is not None and not alive(process.pid)
    assert not process.started_checker()()
    assert process.fetch_metrics() == ""  # no child: nothing to relay, no error


async def test_a_child_that_ends_while_serving_fails_the_runnable_with_its_exit_code() -> None:
    process = child("--exit-after-serving", "3")
    task, _ = await started(process)
    with pytest.raises(WebhookProcessError, match="the webhook process exited with code 3"):
        await asyncio.wait_for(task, 30)
    assert not process.started_checker()()


async def test_a_child_that_ends_before_serving_fails_the_start_naming_it() -> None:
    process = child("--exit-at-once", "2")
    ready = asyncio.Event()
    with pytest.raises(WebhookProcessError, match="exited with code 2 before serving"):
        await asyncio.wait_for(process.start(ready), 30)
    assert not ready.is_set()


async def test_a_child_that_ignores_sigterm_is_killed_after_the_stop_timeout() -> None:
    process = child("--ignore-sigterm", stop_timeout=0.5)
    task, _ = await started(process)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert process.pid is not None and not alive(process.pid)


def test_the_child_stops_when_the_parent_is_gone() -> None:
    """However the parent ended (here: its socket ends closed, as a SIGKILL closes them), the
    child sees EOF on its control socket and stops itself, exit 0."""
    control, child_control = socket.socketpair()
    metrics, child_metrics = socket.socketpair()
    fds = (child_control.fileno(), child_metrics.fileno())
    proc = subprocess.Popen([*CHILD, CHILD_FDS_FLAG, f"{fds[0]},{fds[1]}"], pass_fds=fds)
    child_control.close()
    child_metrics.close()
    try:
        control.settimeout(30)
        assert control.recv(1) == b"S"
        control.close()
        metrics.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def test_the_relay_sums_counters_histograms_and_gauges_per_label_set() -> None:
    parent, child_side = CollectorRegistry(), CollectorRegistry()
    made = {}
    for name, registry in (("parent", parent), ("child", child_side)):
        made[name] = (
            Histogram(
                "webhook_latency_seconds", "latency", ["webhook"], buckets=(0.1, 1.0), registry=registry
            ),
            Gauge("webhook_in_flight", "in flight", ["webhook"], registry=registry),
            Counter("cert_reads", "reads", registry=registry),
        )
    made["parent"][0].labels("/a").observe(0.05)
    made["child"][0].labels("/a").observe(0.5)
    made["child"][0].labels("/b").observe(2.0)
    made["parent"][1].labels("/a").set(1)
    made["child"][1].labels("/a").set(2)
    made["parent"][2].inc()
    made["child"][2].inc(4)
    relay = RelayCollector(made["parent"], lambda: generate_latest(child_side).decode())
    merged = CollectorRegistry()
    merged.register(relay)
    text = generate_latest(merged).decode()
    exposed = samples(text)
    assert exposed[("webhook_latency_seconds_bucket", (("le", "0.1"), ("webhook", "/a")))] == 1.0
    assert exposed[("webhook_latency_seconds_bucket", (("le", "1.0"), ("webhook", "/a")))] == 2.0
    assert exposed[("webhook_latency_seconds_count", (("webhook", "/a"),))] == 2.0
    assert exposed[("webhook_latency_seconds_sum", (("webhook", "/a"),))] == pytest.approx(0.55)
    assert exposed[("webhook_latency_seconds_count", (("webhook", "/b"),))] == 1.0
    assert exposed[("webhook_in_flight", (("webhook", "/a"),))] == 3.0
    assert exposed[("cert_reads_total", ())] == 5.0
    for family in ("webhook_latency_seconds", "webhook_in_flight", "cert_reads_total"):
        assert text.count(f"# TYPE {family} ") == 1  # once: a scrape rejects a repeated family


def test_a_relay_whose_child_does_not_answer_serves_the_managers_own_series() -> None:
    registry = CollectorRegistry()
    local = Counter("cert_reads", "reads", registry=None)
    local.inc()

    def broken() -> str:
        raise ConnectionError("the webhook process closed its metrics socket")

    with relay_metrics(registry, [local], broken):
        assert samples(generate_latest(registry).decode())[("cert_reads_total", ())] == 1.0


def test_a_metrics_exchange_that_fails_stops_relaying_instead_of_reading_a_stale_answer() -> None:
    """A child silent past the timeout may answer later: the next scrape would read that late
    answer as its own. So the socket is closed and later scrapes relay nothing (no error)."""
    process = WebhookProcess(CHILD)
    ours, silent_child = socket.socketpair()
    try:
        process._metrics, process._started = ours, True
        with pytest.raises(TimeoutError):
            process.fetch_metrics(timeout=0.2)
        assert silent_child.recv(1) == b"M"  # it was asked
        assert process.fetch_metrics() == ""
        assert ours.fileno() == -1  # closed
    finally:
        ours.close()
        silent_child.close()
