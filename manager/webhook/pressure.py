"""Admission pressure: the webhook server says when admission is under load, the reconciles yield.

Why: the webhooks answer while the API server holds a user's create open (``kubectl apply``
waits on them), and the reconciles that start on those creates share the cores and the API
server with them. In a burst of creates the manager that reconciles eagerly slows admission
down: on two cores, a 1,000-TrainJob burst took 4.7 s to create against Go's 2.6 s, every create
waiting on an API server busy with the manager's own writes for the TrainJobs created so far
(119 TrainJobs' objects written during the creates against Go's 27), and 1.9 s with the
manager paused during the creates (docs/bench.md, "Admission first"). So while admission is
under load, each reconcile first waits, at most ``max_wait``, for the load to pass
(docs/behaviour/framework.md D.14).

Under load means at least ``threshold`` admission requests arrived within ``window`` seconds:
a burst of creates, not the steady trickle of a cluster's work or the manager's own writes
passing its webhooks. The server's process publishes "under load until" (monotonic
nanoseconds, the clock every process of the machine shares) in one 8-byte word of shared memory
(a memfd, or an unlinked temporary file where there is none) that the manager's process reads: no
message, no lock, one read per reconcile. With the webhooks on a thread of the manager's process
(``--no-webhook-process``) the word is the same, unshared.
"""

from __future__ import annotations

import asyncio
import mmap
import os
import struct
import tempfile
import time

__all__ = ["DEFAULT_MAX_WAIT", "AdmissionPressure"]

DEFAULT_MAX_WAIT = 0.3
"""Seconds a reconcile waits at most for admission load to pass: a steady load slows the
reconciles, never stops them."""

_WORD = struct.Struct("=q")
_NS = 1_000_000_000


class AdmissionPressure:
    """One word of shared memory: the webhook server ``note``s each admission request, the
    controllers' workers ``wait`` while admission is under load.

    ``fd``: the shared memory of the other process (``fileno()`` of the one that ``create``d it);
    none: a private word (both sides in one process)."""

    def __init__(
        self,
        fd: int | None = None,
        *,
        window: float = 0.1,
        threshold: int = 30,
        max_wait: float = DEFAULT_MAX_WAIT,
    ) -> None:
        if fd is None:
            self._map = mmap.mmap(-1, _WORD.size)
            self._fd: int | None = None
        else:
            self._map = mmap.mmap(fd, _WORD.size)
            self._fd = fd
        self.window_ns = int(window * _NS)
        self.threshold = threshold
        self.max_wait = max_wait
        self._window_start = 0
        self._arrivals = 0

    @classmethod
    def shared(cls, *, max_wait: float = DEFAULT_MAX_WAIT) -> AdmissionPressure:
        """A word another process can map: pass ``fileno()`` to it (``pass_fds``)."""
        memfd_create = getattr(os, "memfd_create", None)
        if memfd_create is not None:
            fd = memfd_create("admission-pressure", 0)
        else:  # macOS: an unlinked file serves as well
            with tempfile.TemporaryFile() as file:
                fd = os.dup(file.fileno())
        os.ftruncate(fd, _WORD.size)
        return cls(fd, max_wait=max_wait)

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("a private admission pressure word has no file descriptor")
        return self._fd

    def close(self) -> None:
        self._map.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- the webhook server's side ---------------------------------------------------------------

    def note(self) -> None:
        """An admission request arrived; at ``threshold`` within ``window`` admission is under
        load until one ``window`` after this one (the next window's arrivals extend it)."""
        now = time.monotonic_ns()
        if now - self._window_start > self.window_ns:
            self._window_start = now
            self._arrivals = 0
        self._arrivals += 1
        if self._arrivals >= self.threshold:
            _WORD.pack_into(self._map, 0, now + self.window_ns)

    # -- the controllers' side -------------------------------------------------------------------

    def _until(self) -> int:
        return int(_WORD.unpack_from(self._map, 0)[0])

    def under_load(self) -> bool:
        return self._until() > time.monotonic_ns()

    async def wait(self) -> float:
        """Return once admission is not under load, or after ``max_wait`` s; the seconds waited."""
        until = self._until()
        now = time.monotonic_ns()
        if until <= now or self.max_wait <= 0:
            return 0.0
        start = now
        deadline = now + int(self.max_wait * _NS)
        while until > now and now < deadline:
            # sleep to the end of the load as published, then look again: one wake-up per window
            await asyncio.sleep((min(until, deadline) - now) / _NS)
            until = self._until()
            now = time.monotonic_ns()
        return (now - start) / _NS
