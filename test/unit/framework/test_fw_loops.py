"""Event loops (manager.loops): the loop the manager runs on; guest loops, a coroutine on a
thread of its own, what it hands back to its host, how it stops; and the cache store read from
another thread while the informer writes it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import pytest
import uvloop

from manager import loops
from manager.cache.store import Store, field_index_func, field_index_name


def test_the_manager_runs_on_uvloop_and_returns_what_main_returns() -> None:
    async def main() -> type:
        return type(asyncio.get_running_loop())

    assert loops.run(main()) is uvloop.Loop


LOOP_MODULE = (
    "import asyncio; from manager import loops\n"
    "async def main(): return type(asyncio.get_running_loop()).__module__\n"
    "print(loops.run(main()))"
)


@pytest.mark.parametrize(
    ("flags", "env"), [(["-X", "dev"], {}), ([], {"PYTHONASYNCIODEBUG": "1"})], ids=["-X dev", "env"]
)
def test_asyncio_debug_mode_keeps_asyncio_loop(flags: list[str], env: dict[str, str]) -> None:
    # asyncio's debug checks exist only on its own loop: asking for them must give it
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONASYNCIODEBUG", "PYTHONDEVMODE")}
    out = subprocess.run(
        [sys.executable, *flags, "-c", LOOP_MODULE], capture_output=True, text=True, env=base | env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["asyncio.unix_events"], out.stdout + out.stderr


async def test_a_guest_runs_on_the_managers_kind_of_loop() -> None:
    async def main() -> type:
        return type(asyncio.get_running_loop())

    assert await loops.run_guest(main(), name="guest-loop-kind") is uvloop.Loop


async def test_run_guest_runs_main_on_its_own_thread_and_returns_its_result() -> None:
    host_thread = threading.get_ident()

    async def main() -> tuple[int, bool, bool]:
        return threading.get_ident(), loops.in_guest(), loops.host_loop() is not None

    guest_thread, in_guest, has_host = await loops.run_guest(main(), name="guest-test")
    assert guest_thread != host_thread
    assert in_guest and has_host
    assert not loops.in_guest() and loops.host_loop() is None  # the host is no guest
    assert "guest-test" not in {t.name for t in threading.enumerate()}


async def test_run_guest_raises_what_main_raises() -> None:
    async def main() -> None:
        raise LookupError("from the guest")

    with pytest.raises(LookupError, match="from the guest"):
        await loops.run_guest(main(), name="guest-raises")


async def test_on_host_runs_on_the_host_loop_with_its_objects() -> None:
    host = asyncio.get_running_loop()
    host_thread = threading.get_ident()
    gate = asyncio.Event()  # a host-loop object a guest must not await directly

    async def on_the_host() -> tuple[int, asyncio.AbstractEventLoop]:
        await gate.wait()
        return threading.get_ident(), asyncio.get_running_loop()

    async def fails_on_the_host() -> None:
        raise KeyError("host side")

    async def main() -> tuple[int, asyncio.AbstractEventLoop]:
        loops.call_on_host(gate.set)
        result = await loops.on_host(on_the_host())
        with pytest.raises(KeyError, match="host side"):
            await loops.on_host(fails_on_the_host())
        return result

    thread, loop = await loops.run_guest(main(), name="guest-on-host")
    assert (thread, loop) == (host_thread, host)
    # outside a guest, on_host is a plain await
    assert await loops.on_host(on_the_host()) == (host_thread, host)


async def test_cancelling_run_guest_stops_main_gracefully_and_ends_the_thread() -> None:
    started = threading.Event()
    cleaned = threading.Event()

    async def main() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.05)  # a graceful stop takes a moment on the guest loop
            cleaned.set()

    task = asyncio.create_task(loops.run_guest(main(), name="guest-cancelled"))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()  # run_guest returned only after main's cleanup
    assert "guest-cancelled" not in {t.name for t in threading.enumerate()}


def test_store_reads_from_another_thread_never_see_a_torn_write() -> None:
    """An object re-put again and again (unindex, store, re-index) is always found by its index
    from a second thread, and listing never trips over a dict changing size."""
    store = Store()
    index = field_index_name("spec.owner")
    store.add_index(index, field_index_func(lambda o: [o["spec"]["owner"]]))
    store.put({"metadata": {"name": "pinned", "namespace": "ns"}, "spec": {"owner": "a"}})
    stop = threading.Event()
    problems: list[str] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            store.put({"metadata": {"name": "pinned", "namespace": "ns"}, "spec": {"owner": "a"}, "n": i})
            store.put({"metadata": {"name": f"o{i % 50}", "namespace": "ns"}, "spec": {"owner": "b"}})
            if i % 7 == 0:
                store.delete(f"ns/o{(i * 3) % 50}")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(3000):
            try:
                if [o["metadata"]["name"] for o in store.by_index(index, "ns/a")] != ["pinned"]:
                    problems.append("the pinned object was missing from its index")
                store.values()
                store.keys_in_namespace("ns")
            except RuntimeError as err:  # "dictionary changed size during iteration"
                problems.append(str(err))
    finally:
        stop.set()
        thread.join()
    assert problems == []
