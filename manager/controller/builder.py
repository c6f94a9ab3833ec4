"""The builder: declare what a controller watches in one readable sentence.

    Builder(mgr).for_(Widget, predicates=[generation_changed()]).owns(Deployment).complete(WidgetReconciler())

``for_`` reconciles the object itself; ``owns`` reconciles the controller owner of an owned
object (owner-based requeue); ``watches`` takes any handler. ``with_event_filter`` predicates
apply to every watch, before each watch's own. Nothing runs until the manager starts: the
controller is added to the manager as a leader-election runnable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, Unpack

from manager.cache.interfaces import Informers
from manager.controller.controller import Controller, OptionOverrides, Options
from manager.controller.handler import EventHandler, enqueue_for_object, enqueue_for_owner
from manager.controller.predicate import Predicate
from manager.controller.reconcile import ReconcileFunc, Reconciler
from manager.controller.source import KindSource, Source
from manager.runnable import Runnable
from manager.scheme import KindRef, gvk_for


class ControllerManager(Protocol):
    """What the builder needs from the manager."""

    @property
    def informers(self) -> Informers: ...

    def add(self, runnable: Runnable) -> None: ...

    def claim_controller_name(self, name: str) -> None:
        """Reserve ``name``; raise ``ValueError`` if another controller already uses it."""
        ...

    def controller_options(self, group_kind: str) -> Options:
        """The manager-wide controller defaults, with the concurrency configured for ``group_kind``."""
        ...


@dataclass
class _Watch:
    kind: KindRef
    handler: EventHandler | None  # None: decided at build time (owns needs the for_ kind)
    predicates: Sequence[Predicate]
    only_controller: bool = True


class Builder:
    def __init__(self, mgr: ControllerManager) -> None:
        self._mgr = mgr
        self._for: _Watch | None = None
        self._owns: list[_Watch] = []
        self._watches: list[_Watch] = []
        self._raw_sources: list[Source] = []
        self._filters: list[Predicate] = []
        self._base: Options | None = None
        self._overrides: OptionOverrides = {}
        self._name: str | None = None

    def for_(self, kind: KindRef, *, predicates: Sequence[Predicate] = ()) -> Builder:
        """The kind this controller reconciles; events for an object enqueue that object."""
        if self._for is not None:
            raise ValueError("for_() can only be called once")
        self._for = _Watch(kind, enqueue_for_object(), predicates)
        return self

    def owns(
        self, kind: KindRef, *, predicates: Sequence[Predicate] = (), match_every_owner: bool = False
    ) -> Builder:
        """A kind this controller creates; events for one enqueue its controller owner of the ``for_`` kind."""
        self._owns.append(_Watch(kind, None, predicates, only_controller=not match_every_owner))
        return self

    def watches(
        self, kind: KindRef, handler: EventHandler, *, predicates: Sequence[Predicate] = ()
    ) -> Builder:
        self._watches.append(_Watch(kind, handler, predicates))
        return self

    def watches_raw_source(self, source: Source) -> Builder:
        """Any source (e.g. a ``ChannelSource`` for external triggers); event filters do not apply."""
        self._raw_sources.append(source)
        return self

    def with_event_filter(self, predicate: Predicate) -> Builder:
        self._filters.append(predicate)
        return self

    def with_options(
        self, options: Options | None = None, /, **overrides: Unpack[OptionOverrides]
    ) -> Builder:
        """Controller options, as an ``Options`` or keywords (``max_concurrent_reconciles=10``).

        Keywords override the manager's defaults (including ``group_kind_concurrency``); a full
        ``Options`` replaces them.
        """
        if options is not None:
            self._base = options
        self._overrides.update(overrides)
        return self

    def named(self, name: str) -> Builder:
        self._name = name
        return self

    def build(self, reconciler: Reconciler | ReconcileFunc) -> Controller:
        if self._owns and self._for is None:
            raise ValueError("owns() requires for_() to be set: it enqueues the for_ kind's owner")
        if self._for is None and not self._watches and not self._raw_sources:
            raise ValueError(
                "there are no watches configured, controller will never get triggered. "
                "Use for_(), owns(), watches() or watches_raw_source() to set them up"
            )
        if self._name is None and self._for is None:
            raise ValueError("a controller without for_() must be given a name with named()")
        for_gvk = gvk_for(self._for.kind) if self._for is not None else None
        name = self._name or (for_gvk.kind.lower() if for_gvk else "")
        self._mgr.claim_controller_name(name)
        # concurrency is looked up by the for_ kind or, without for_, by the first watched kind:
        # upstream skips the lookup without for_, which left Trainer's controllers at 1 worker
        main_kind = (
            self._for.kind if self._for is not None else (self._watches[0].kind if self._watches else None)
        )
        group_kind = gvk_for(main_kind).group_kind if main_kind is not None else ""
        base = self._base or self._mgr.controller_options(group_kind)
        options = dataclasses.replace(base, **self._overrides)
        controller = Controller(
            name,
            reconciler,
            options,
            kind=for_gvk.kind if for_gvk else "",
            group=for_gvk.group if for_gvk else "",
        )
        informers = self._mgr.informers
        watches = [self._for] if self._for is not None else []
        for owned in self._owns:
            assert self._for is not None
            handler = enqueue_for_owner(self._for.kind, only_controller=owned.only_controller)
            watches.append(dataclasses.replace(owned, handler=handler))
        watches.extend(self._watches)
        for watch in watches:
            assert watch.handler is not None
            predicates = [*self._filters, *watch.predicates]
            controller.watch(KindSource(informers, watch.kind, watch.handler, predicates))
        for source in self._raw_sources:
            controller.watch(source)
        return controller

    def complete(self, reconciler: Reconciler | ReconcileFunc) -> Controller:
        """Build the controller and add it to the manager; returns it (handy in tests)."""
        controller = self.build(reconciler)
        self._mgr.add(controller)
        return controller
