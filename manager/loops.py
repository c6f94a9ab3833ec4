"""Event loops: the manager's (``run``, ``new_event_loop``: uvloop's) and guest loops, an event
loop on a thread of its own, started by the manager's loop (its host).

The manager runs every controller, informer and client on one asyncio loop. A server whose
answers must not wait behind that loop's work (the admission webhook server: the API server
holds a user's request open while it waits) runs on a *guest loop* instead: ``run_guest``
starts a thread with a new loop, runs one coroutine there, and returns (or raises) what it
returns once it ends; cancelling ``run_guest`` cancels that coroutine on its loop and waits for
the thread to finish.

Code on a guest loop may use the framework's shared objects, which know where their state lives:
the cache's reads are served on the calling thread (its store is locked), and whatever is bound
to the host loop -- API requests on the client's HTTP session, discovery, starting an informer,
waiting for a sync, recording an event -- is handed to the host with ``on_host``. Other asyncio
objects of the host loop (locks, events, queues, sessions) must not be awaited from a guest
directly; ``on_host(coro)`` runs such a coroutine where they live.

``in_guest()`` is a thread-local read, cheap enough for every request of a hot path.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GUEST_STACK_SIZE = 16 * 1024 * 1024
"""The guest thread's stack: at least a main thread's usual 8 MiB, so deeply nested input (a
webhook's hostile JSON) recurses there as far as it would on the main thread."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop for the manager, its webhook process and its guest threads: uvloop's (libuv,
    its sockets and TLS in C: on asyncio's own loop the pure-Python TLS reads of the watches and
    requests are a busy manager's largest share of CPU after its reconciles), asyncio's in
    asyncio's debug mode (``PYTHONASYNCIODEBUG``, ``python -X dev``: its checks exist only there)
    and where uvloop is not installed (it is a dependency where it builds: not on Windows)."""
    if sys.flags.dev_mode or os.environ.get("PYTHONASYNCIODEBUG"):
        return asyncio.new_event_loop()
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on :func:`new_event_loop`: the manager's entry points run on this."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


class _Local(threading.local):
    host: asyncio.AbstractEventLoop | None = None


_local = _Local()


def in_guest() -> bool:
    """Whether the calling thread runs a guest loop (``run_guest``)."""
    return _local.host is not None


def host_loop() -> asyncio.AbstractEventLoop | None:
    """The loop that started the calling thread's guest loop; None outside a guest."""
    return _local.host


async def on_host(coro: Coroutine[Any, Any, T]) -> T:
    """``await coro`` on the host loop when called from a guest loop, else right here.

    Cancelling the caller cancels ``coro`` on the host; its result or exception comes back."""
    host = _local.host
    if host is None:
        return await coro
    future = asyncio.run_coroutine_threadsafe(coro, host)
    return await asyncio.wrap_future(future)  # a cancelled wrapper cancels the host's task


def call_on_host(callback: Callable[[], object]) -> None:
    """Run ``callback`` on the host loop (soon) from a guest, or right now elsewhere."""
    host = _local.host
    if host is None:
        callback()
    else:
        host.call_soon_threadsafe(callback)


Outcome = tuple[bool, Any]
"""How ``main`` ended: (True, what it returned) or (False, what it raised)."""


def _run(
    loop: asyncio.AbstractEventLoop,
    task: asyncio.Task[Any],
    host: asyncio.AbstractEventLoop,
    done: concurrent.futures.Future[Outcome],
) -> None:
    """The guest thread: run ``task`` to its end, close the loop, then report to the host."""
    _local.host = host
    asyncio.set_event_loop(loop)
    outcome: Outcome
    try:
        outcome = (True, loop.run_until_complete(task))
    except BaseException as err:  # handed to the host, which raises it
        outcome = (False, err)
    finally:
        _close(loop)
        asyncio.set_event_loop(None)
        _local.host = None
    done.set_result(outcome)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does after its main task: cancel and await the tasks left, finish
    async generators and the default executor, close the loop."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


async def run_guest(main: Coroutine[Any, Any, T], *, name: str) -> T:
    """Run ``main`` on a new thread ``name`` with its own event loop, a guest of the running one.

    Returns what ``main`` returns, raises what it raises. Cancelled, it cancels ``main`` on the
    guest loop and waits for the thread to end (a second cancellation stops the wait; the thread
    is a daemon and still finishes ``main``'s cleanup)."""
    host = asyncio.get_running_loop()
    loop = new_event_loop()
    task = loop.create_task(main, name=name)  # the loop runs nowhere yet: safe from this thread
    done: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
    done.set_running_or_notify_cancel()  # only the thread ends it, never a cancelled waiter
    thread = threading.Thread(target=_run, args=(loop, task, host, done), name=name, daemon=True)
    previous = threading.stack_size(GUEST_STACK_SIZE)
    try:
        thread.start()
    finally:
        threading.stack_size(previous)
    try:
        ok, value = await asyncio.wrap_future(done)
    except asyncio.CancelledError:
        with contextlib.suppress(RuntimeError):  # the loop closed already: main has ended
            loop.call_soon_threadsafe(task.cancel)
        ok, value = await asyncio.wrap_future(done)  # main's cleanup (a graceful server stop)
        if ok or isinstance(value, asyncio.CancelledError):
            raise
        raise value from None
    finally:
        if done.done():
            thread.join()  # it only returns from _run: at once
    if ok:
        result: T = value
        return result
    raise value
