"""The admission webhooks served from a child process: its own interpreter and its own lock.

Why: on a thread of the manager's process every answer waits for the interpreter lock behind the
reconciles (docs/bench.md, "Admission under load"); a child process answers on a core of its
own, as Go's webhook goroutines do (docs/behaviour/framework.md D.13).

Two halves, one per process, joined by two socket pairs the parent creates:

- the parent's ``WebhookProcess``, a webhook-server runnable: it starts the child's command with
  ``CHILD_FDS_FLAG a,b`` (its ends of the pairs), is started once the child says its server
  listens, and on stop sends SIGTERM and waits (SIGKILL after ``stop_timeout``). A child that
  exits on its own fails the runnable, so the manager stops, as when a webhook server fails.
  ``relay_metrics`` puts the child's webhook and certificate metrics on the parent's registry,
  summed with the parent's own series of the same names, fetched at each scrape.
- the child's ``ParentLink``, the child's webhook server run as a runnable linked to the
  parent: it reports "serving" once the server listens, answers the parent's metrics requests,
  and stops the child's manager when the parent is gone (its control socket reads EOF), however
  the parent ended.

The child runs in a session of its own: a terminal's Ctrl-C reaches the parent only, which then
stops the child last, after its controllers (the manager's stop order).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from manager.webhook.pressure import AdmissionPressure
from manager.webhook.server import DEFAULT_CERT_DIR

log = logging.getLogger(__name__)

CHILD_FDS_FLAG = "--webhook-child-fds"
"""The flag that makes a command the child: its ends of the control and metrics socket pairs,
and the admission pressure word it shares (``manager.webhook.pressure``) when there is one."""

_SERVING = b"S"
_METRICS = b"M"
_LENGTH = struct.Struct("!Q")


class WebhookProcessError(Exception):
    """The webhook process could not start or ended while the manager ran."""


class WebhookProcess:
    """A webhook-server runnable whose server runs in a child process (``command``).

    ``cert_dir`` is where the child's server reads its certificates (the certificate rotator of
    the parent writes them there)."""

    manager_group = "webhooks"
    needs_leader_election = False

    def __init__(
        self,
        command: Sequence[str],
        *,
        cert_dir: Path | str = DEFAULT_CERT_DIR,
        stop_timeout: float = 25.0,
        pressure: AdmissionPressure | None = None,
    ) -> None:
        self.command = list(command)
        self.pressure = pressure
        """Shared with the child, whose server notes every admission request in it."""
        self.cert_dir = Path(cert_dir)
        self.stop_timeout = stop_timeout
        self._started = False
        self._metrics: socket.socket | None = None
        self._metrics_lock = threading.Lock()
        self.pid: int | None = None

    def register(self, path: str, handler: object) -> None:
        raise WebhookProcessError("the webhook process registers its handlers in the child")

    def started_checker(self) -> Callable[[], bool]:
        """True while the child's server listens (a readiness check)."""
        return lambda: self._started

    async def start(self, started: asyncio.Event) -> None:
        control, child_control = socket.socketpair()
        metrics, child_metrics = socket.socketpair()
        fds = [child_control.fileno(), child_metrics.fileno()]
        if self.pressure is not None:
            fds.append(self.pressure.fileno())
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command,
                CHILD_FDS_FLAG,
                ",".join(map(str, fds)),
                pass_fds=fds,
                start_new_session=True,
            )
        except BaseException:
            for sock in (control, child_control, metrics, child_metrics):
                sock.close()
            raise
        child_control.close()
        child_metrics.close()
        self.pid = proc.pid
        self._metrics = metrics
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(sock=control)
            if await reader.read(1) != _SERVING:
                code = await proc.wait()
                raise WebhookProcessError(f"the webhook process exited with code {code} before serving")
            self._started = True
            started.set()
            log.info("webhook process serving", extra={"pid": proc.pid})
            await reader.read()  # EOF: the child has ended
            code = await proc.wait()
            raise WebhookProcessError(f"the webhook process exited with code {code}")
        finally:
            self._started = False
            if proc.returncode is None:  # cancelled (the manager stops), or failed here
                await asyncio.shield(self._stop(proc))
            if writer is not None:
                writer.close()
            else:
                control.close()
            with self._metrics_lock:
                self._metrics = None
                metrics.close()

    async def _stop(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout``: the child's graceful stop, bounded."""
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), self.stop_timeout)
        except TimeoutError:
            log.warning("webhook process did not stop in %ss: killing it", self.stop_timeout)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    def fetch_metrics(self, timeout: float = 2.0) -> str:
        """The child's relayed metrics in the text format ('' while no child serves).

        Blocking, for a collector (the metrics server calls collectors off its loop). A failed
        exchange (the child silent past ``timeout``) may leave part of an answer unread, so the
        socket is closed and the child's series are not relayed again (logged by the collector)."""
        with self._metrics_lock:
            sock = self._metrics
            if sock is None or not self._started:
                return ""
            try:
                sock.settimeout(timeout)
                sock.sendall(_METRICS)
                (length,) = _LENGTH.unpack(_receive(sock, _LENGTH.size))
                return _receive(sock, length).decode()
            except BaseException:
                self._metrics = None
                sock.close()
                raise


def _receive(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the webhook process closed its metrics socket")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class RelayCollector(Collector):
    """The parent's own collectors of the relayed names, summed with the child's series.

    Counters, histograms and gauges add up per label set (a certificate read in either process
    counts once); a ``_created`` sample keeps the earliest."""

    def __init__(self, local: Iterable[Collector], fetch: Callable[[], str]) -> None:
        self.local = list(local)
        self.fetch = fetch

    def describe(self) -> list[Metric]:
        return [metric for collector in self.local for metric in collector.collect()]

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for collector in self.local:
            for metric in collector.collect():
                families[metric.name] = _copy(metric)
        try:
            text = self.fetch()
        except (OSError, ValueError, struct.error) as err:
            log.warning("webhook process metrics not relayed: %s", err)
            text = ""
        for metric in text_string_to_metric_families(text):
            mine = families.setdefault(metric.name, _copy(metric, samples=False))
            _add(mine, metric)
        yield from families.values()


def _copy(metric: Metric, *, samples: bool = True) -> Metric:
    copy = Metric(metric.name, metric.documentation, metric.type, metric.unit)
    if samples:
        copy.samples = list(metric.samples)
    return copy


def _add(into: Metric, other: Metric) -> None:
    index = {(s.name, tuple(sorted(s.labels.items()))): i for i, s in enumerate(into.samples)}
    for sample in other.samples:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        at = index.get(key)
        if at is None:
            index[key] = len(into.samples)
            into.samples.append(sample)
            continue
        have = into.samples[at]
        value = (
            min(have.value, sample.value) if sample.name.endswith("_created") else have.value + sample.value
        )
        into.samples[at] = have._replace(value=value)


@contextlib.contextmanager
def relay_metrics(
    registry: CollectorRegistry, collectors: Sequence[Collector], fetch: Callable[[], str]
) -> Iterator[RelayCollector]:
    """While open: ``collectors``' names on ``registry`` served as their sum with the child's
    (``fetch``); on exit the registry is as it was."""
    replaced = []
    for collector in collectors:
        with contextlib.suppress(KeyError):  # not registered there
            registry.unregister(collector)
            replaced.append(collector)
    relay = RelayCollector(collectors, fetch)
    registry.register(relay)
    try:
        yield relay
    finally:
        registry.unregister(relay)
        for collector in replaced:
            registry.register(collector)


class _Server(Protocol):
    async def start(self, started: asyncio.Event) -> None: ...


class ParentLink:
    """The child's webhook-server runnable: ``server`` run and linked to the parent.

    Reports "serving" once ``server`` has started, answers the parent's requests for
    ``collectors`` (the relayed metrics), and calls ``stop()`` when the parent is gone."""

    manager_group = "webhooks"
    needs_leader_election = False

    def __init__(
        self,
        server: _Server,
        fds: tuple[int, int],
        stop: Callable[[], None],
        collectors: Sequence[Collector],
    ) -> None:
        self.server = server
        self.fds = fds
        self.stop = stop
        self.exposed = CollectorRegistry(auto_describe=True)
        for collector in collectors:
            self.exposed.register(collector)

    async def start(self, started: asyncio.Event) -> None:
        control_reader, control = await asyncio.open_connection(sock=socket.socket(fileno=self.fds[0]))
        metrics_reader, metrics = await asyncio.open_connection(sock=socket.socket(fileno=self.fds[1]))
        serving = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.server.start(serving), name="webhook-server")
                tasks.create_task(self._answer_metrics(metrics_reader, metrics), name="webhook-metrics")
                await serving.wait()
                started.set()
                control.write(_SERVING)
                await control.drain()
                await control_reader.read()  # EOF: the parent has ended (or closed its end)
                log.info("webhook process: the manager is gone, stopping")
                self.stop()  # the stopping manager cancels this runnable, the server with it
        finally:
            control.close()
            metrics.close()

    async def _answer_metrics(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(1) == _METRICS:
            body = generate_latest(self.exposed)
            writer.write(_LENGTH.pack(len(body)) + body)
            await writer.drain()
