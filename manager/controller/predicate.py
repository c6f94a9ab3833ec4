"""Predicates: decide whether an event should reach the handler at all.

Built-ins mirror controller-runtime: ``generation_changed`` (spec changes only; status-only
writes do not bump the generation of a CRD with a status sub-resource), ``resource_version_changed``
(drops resync updates), ``labels_changed``, ``annotations_changed``, ``label_selector`` (any event
whose object matches), and the combinators ``and_``, ``or_``, ``not_``. Change predicates only
filter updates; create, delete and generic events pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.meta.object import Json as Object


class Predicate(Protocol):
    def create(self, event: CreateEvent) -> bool: ...

    def update(self, event: UpdateEvent) -> bool: ...

    def delete(self, event: DeleteEvent) -> bool: ...

    def generic(self, event: GenericEvent) -> bool: ...


@dataclass(frozen=True)
class Funcs:
    """A predicate from optional callables; an unset callable lets its events through."""

    on_create: Callable[[CreateEvent], bool] | None = None
    on_update: Callable[[UpdateEvent], bool] | None = None
    on_delete: Callable[[DeleteEvent], bool] | None = None
    on_generic: Callable[[GenericEvent], bool] | None = None

    def create(self, event: CreateEvent) -> bool:
        return self.on_create(event) if self.on_create else True

    def update(self, event: UpdateEvent) -> bool:
        return self.on_update(event) if self.on_update else True

    def delete(self, event: DeleteEvent) -> bool:
        return self.on_delete(event) if self.on_delete else True

    def generic(self, event: GenericEvent) -> bool:
        return self.on_generic(event) if self.on_generic else True


def new_predicate_funcs(keep: Callable[[Object], bool]) -> Predicate:
    """A predicate applying ``keep`` to the event's object (the new object for updates)."""
    return Funcs(
        on_create=lambda e: keep(e.object),
        on_update=lambda e: keep(e.object_new),
        on_delete=lambda e: keep(e.object),
        on_generic=lambda e: keep(e.object),
    )


def _meta(obj: Object) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _update_changed(field: str) -> Predicate:
    def changed(event: UpdateEvent) -> bool:
        return _meta(event.object_old).get(field) != _meta(event.object_new).get(field)

    return Funcs(on_update=changed)


def generation_changed() -> Predicate:
    """Pass updates only when ``metadata.generation`` changed (spec edits, not status writes)."""
    return _update_changed("generation")


def resource_version_changed() -> Predicate:
    """Pass updates only when ``metadata.resourceVersion`` changed (drops periodic resyncs)."""
    return _update_changed("resourceVersion")


def labels_changed() -> Predicate:
    def changed(event: UpdateEvent) -> bool:
        return (_meta(event.object_old).get("labels") or {}) != (_meta(event.object_new).get("labels") or {})

    return Funcs(on_update=changed)


def annotations_changed() -> Predicate:
    def changed(event: UpdateEvent) -> bool:
        old = _meta(event.object_old).get("annotations") or {}
        return old != (_meta(event.object_new).get("annotations") or {})

    return Funcs(on_update=changed)


def _requirement_matches(labels: Mapping[str, str], requirement: Mapping[str, Any]) -> bool:
    key = requirement["key"]
    operator = requirement["operator"]
    values: Sequence[str] = requirement.get("values") or ()
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise ValueError(f"unknown label selector operator {operator!r}")


def selector_matches(selector: Object, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a metav1.LabelSelector (``matchLabels`` and ``matchExpressions``)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_requirement_matches(labels, r) for r in selector.get("matchExpressions") or ())


def label_selector(selector: Object) -> Predicate:
    """Pass any event whose object's labels match ``selector`` (a metav1.LabelSelector dict).

    A plain ``{"key": "value"}`` mapping without ``matchLabels``/``matchExpressions`` keys is
    read as ``matchLabels``.
    """
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": dict(selector)}
    for requirement in selector.get("matchExpressions") or ():
        _requirement_matches({}, requirement)  # reject unknown operators now, not per event
    return new_predicate_funcs(lambda obj: selector_matches(selector, _meta(obj).get("labels") or {}))


def and_(*predicates: Predicate) -> Predicate:
    """Passes an event that every one of ``predicates`` passes."""
    return _combined(all, predicates)


def or_(*predicates: Predicate) -> Predicate:
    """Passes an event that any one of ``predicates`` passes."""
    return _combined(any, predicates)


def _combined(reduce: Callable[[Iterable[bool]], bool], predicates: tuple[Predicate, ...]) -> Predicate:
    return Funcs(
        on_create=lambda e: reduce(p.create(e) for p in predicates),
        on_update=lambda e: reduce(p.update(e) for p in predicates),
        on_delete=lambda e: reduce(p.delete(e) for p in predicates),
        on_generic=lambda e: reduce(p.generic(e) for p in predicates),
    )


def not_(predicate: Predicate) -> Predicate:
    return Funcs(
        on_create=lambda e: not predicate.create(e),
        on_update=lambda e: not predicate.update(e),
        on_delete=lambda e: not predicate.delete(e),
        on_generic=lambda e: not predicate.generic(e),
    )
