"""Controllers: requests, reconcilers, sources, handlers, predicates and the builder."""

from manager.controller.builder import Builder
from manager.controller.controller import CacheSyncTimeoutError, Controller, OptionOverrides, Options
from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.controller.handler import (
    EventHandler,
    Funcs,
    enqueue_for_object,
    enqueue_for_owner,
    enqueue_from_async_map,
    enqueue_from_map,
)
from manager.controller.predicate import (
    Predicate,
    and_,
    annotations_changed,
    generation_changed,
    label_selector,
    labels_changed,
    new_predicate_funcs,
    not_,
    or_,
    resource_version_changed,
)
from manager.controller.reconcile import (
    ReconcileError,
    Reconciler,
    Request,
    Result,
    TerminalError,
    is_routine,
    object_reconciler,
)
from manager.controller.source import ChannelSource, KindSource, Source

__all__ = [
    "Builder",
    "CacheSyncTimeoutError",
    "ChannelSource",
    "Controller",
    "CreateEvent",
    "DeleteEvent",
    "EventHandler",
    "Funcs",
    "GenericEvent",
    "KindSource",
    "OptionOverrides",
    "Options",
    "Predicate",
    "ReconcileError",
    "Reconciler",
    "Request",
    "Result",
    "Source",
    "TerminalError",
    "UpdateEvent",
    "and_",
    "annotations_changed",
    "enqueue_for_object",
    "enqueue_for_owner",
    "enqueue_from_async_map",
    "enqueue_from_map",
    "generation_changed",
    "is_routine",
    "label_selector",
    "labels_changed",
    "new_predicate_funcs",
    "not_",
    "object_reconciler",
    "or_",
    "resource_version_changed",
]
