"""The events a source delivers to handlers and predicates (objects are read-only dicts)."""

from __future__ import annotations

from dataclasses import dataclass

from manager.meta.object import Json as Object


@dataclass(frozen=True, slots=True)
class CreateEvent:
    object: Object
    is_in_initial_list: bool = False


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    object_old: Object
    object_new: Object


@dataclass(frozen=True, slots=True)
class DeleteEvent:
    object: Object
    delete_state_unknown: bool = False


@dataclass(frozen=True, slots=True)
class GenericEvent:
    """An event from outside the API server (a channel source, a timer, another system)."""

    object: Object


Event = CreateEvent | UpdateEvent | DeleteEvent | GenericEvent
