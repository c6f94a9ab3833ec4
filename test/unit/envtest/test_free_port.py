"""``free_port`` hands out loopback ports no outbound connection can take.

A port from the kernel's ephemeral range can be given to a client's source port between the
pick and the listener's bind, or while a process restarted on the same port is down; a chaos
replica once crash-looped on EADDRINUSE for two minutes that way.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from manager.envtest import process
from manager.envtest.process import free_port

pytestmark = pytest.mark.unit


def test_ports_lie_outside_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    low, high = process._ephemeral_range()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(not low <= p <= high for p in ports), [p for p in ports if low <= p <= high]
    for port in ports[:20]:  # each one binds: it was free
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        busy.listen()
        monkeypatch.setattr(process, "_listen_ports", lambda: range(taken, taken + 1))
        # the only candidate is taken: after its tries it falls back to a kernel-chosen port
        port = free_port()
        assert port != taken
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_an_overlapping_tuned_range_moves_our_ports_below_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "_ephemeral_range", lambda: (15000, 65000))
    ports = process._listen_ports()
    assert ports.start == 10000 and ports[-1] == 14999


def test_a_port_another_process_picked_is_not_handed_out_until_it_exits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A test that picks ports for a ``make run`` it starts, and the control plane that
    ``make run`` starts, pick from the same range in two processes: neither may get a port the
    other picked and has not bound yet (CI once saw a manager and its own API server collide)."""
    monkeypatch.setattr(process, "_RESERVATIONS_DIR", tmp_path)
    first = free_port()
    window = range(first, first + 12)
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib\n"
            "from manager.envtest import process as p\n"
            f"p._RESERVATIONS_DIR = pathlib.Path({str(tmp_path)!r})\n"
            f"p._listen_ports = lambda: range({window.start}, {window.stop})\n"
            "print(' '.join(str(p.free_port()) for _ in range(6)), flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(process.__file__).resolve().parents[2],
    )
    try:
        assert other.stdout is not None
        theirs = {int(p) for p in other.stdout.readline().split()}
        assert first not in theirs  # held by this process since it was handed out
        monkeypatch.setattr(process, "_listen_ports", lambda: window)
        monkeypatch.setattr(process, "_handed_out", set())
        ours = {free_port() for _ in range(3)}
        assert ours.isdisjoint(theirs) and ours <= set(window), (ours, theirs)
    finally:
        other.communicate("", timeout=30)
    # once that process is gone its ports are free to pick again
    monkeypatch.setattr(process, "_handed_out", set(ours | {first}))
    again = {free_port() for _ in range(len(window) - len(ours) - 1)}
    assert theirs <= again, (theirs, again)
