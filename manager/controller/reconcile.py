"""What a controller hands to user code and what it gets back.

A ``Request`` names one object (namespace and name); it is hashable, so it is also the work
queue key and repeated events for one object collapse into one reconcile. It is a named tuple:
the queue hashes and compares it several times an event, which a tuple does in C (a frozen
dataclass's generated ``__hash__`` and ``__eq__`` run as Python, four times the cost).

Returning ``None`` or ``Result()`` means done; ``Result(requeue_after=s)`` asks to look again in
``s`` seconds; raising asks for a retry with backoff, except ``TerminalError``, which is recorded
and not retried until the object changes again.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, cast

from manager.client.errors import NotFound, RequestError
from manager.client.interfaces import Reader
from manager.client.restmapper import NoKindMatch
from manager.errors import Error
from manager.meta.object import Json
from manager.scheme import GroupVersionKind, ObjectKey


class Request(NamedTuple):
    namespace: str
    name: str

    @classmethod
    def for_object(cls, obj: Json) -> Request:
        meta = obj.get("metadata") or {}
        return cls(meta.get("namespace") or "", meta.get("name") or "")

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """``requeue_after``: seconds until the next look at this object, if positive."""

    requeue_after: float | None = None

    def is_zero(self) -> bool:
        return not self.requeue_after


class Reconciler(Protocol):
    async def reconcile(self, req: Request) -> Result | None:
        """Make the world match the object named by ``req``; must be idempotent."""
        ...


ReconcileFunc = Callable[[Request], Awaitable["Result | None"]]


class TerminalError(Error):
    """An error retrying cannot fix (bad spec, unsupported configuration): no requeue.

    The object is reconciled again when an event for it arrives, as with any other key.
    """

    def __init__(self, message: str | BaseException) -> None:
        super().__init__(str(message))
        if isinstance(message, BaseException):
            self.__cause__ = message


class ReconcileError(Error):
    """An expected failure (e.g. a dependency not ready yet): retried with backoff.

    Exceptions that are neither this, an API error nor a ``TerminalError`` are probable bugs
    (``KeyError``, ``AttributeError``...): they are retried too but also counted in
    ``controller_runtime_reconcile_panics_total``, the counterpart of a recovered Go panic.
    """


def as_reconcile_func(reconciler: Reconciler | ReconcileFunc) -> ReconcileFunc:
    """Accept an object with ``reconcile``, a bare ``async def f(req)``, or a plain ``def``.

    A plain (synchronous) function or method runs in a worker thread through
    ``asyncio.to_thread`` (log context is copied), so blocking code does not stall every other
    controller on the loop.
    """
    method = getattr(reconciler, "reconcile", None)
    target: Any = method if method is not None and callable(method) else reconciler
    if not callable(target):
        raise TypeError(f"{reconciler!r} is neither a Reconciler nor a function of a Request")
    if inspect.iscoroutinefunction(target):
        func: ReconcileFunc = target
        return func

    async def in_thread(req: Request) -> Result | None:
        result = await asyncio.to_thread(target, req)
        if inspect.isawaitable(result):  # e.g. a lambda returning a coroutine
            result = await result
        return cast("Result | None", result)

    return in_thread


ObjectReconcileFunc = Callable[[Json], Awaitable["Result | None"]]


def object_reconciler(reader: Reader, kind: GroupVersionKind, fn: ObjectReconcileFunc) -> ReconcileFunc:
    """Adapt ``fn(obj)`` into a request reconciler: fetch the object, skip it if it is gone.

    The counterpart of controller-runtime's ``reconcile.AsReconciler``: a NotFound means the
    object was deleted since the event, which needs no work (owned objects go with it).
    """

    async def reconcile(req: Request) -> Result | None:
        try:
            obj = await reader.get(kind, req.name, req.namespace)
        except NotFound:
            return None
        return await fn(obj)

    return reconcile


_ROUTINE = (ReconcileError, RequestError, NoKindMatch, TimeoutError)


def is_routine(err: BaseException) -> bool:
    """An error retrying is meant for: an API error, a ``ReconcileError``, an unserved kind, a timeout.

    A wrapper raised ``from`` a routine error (``raise JobCreationError(...) from api_error``) is
    routine too, and so is an ``ExceptionGroup`` of routine errors (several parallel writes
    refused). Anything else is a probable bug: logged with its traceback, counted as a panic.
    """
    return _routine_cause(err) is not None


def _routine_cause(err: BaseException) -> BaseException | None:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _ROUTINE):
            return current
        if isinstance(current, BaseExceptionGroup):
            causes = [_routine_cause(e) for e in current.exceptions]
            return causes[0] if causes and all(c is not None for c in causes) else None
        current = current.__cause__
    return None


def _routine_type(err: BaseException) -> str:
    """The routine error's type, e.g. ``Conflict``; a wrapper names what it wraps: ``JobCreationError(Forbidden)``."""
    cause = _routine_cause(err)
    if cause is None or cause is err:
        return type(err).__name__
    return f"{type(err).__name__}({type(cause).__name__})"
