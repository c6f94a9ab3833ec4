"""What every component's ``setup(context) -> bool`` receives from the entry point.

The entry point (``trainer.__main__``, through ``trainer.components``) builds one
``SetupContext`` per process and hands it to each component's controllers and webhooks in
turn. The context owns what more than one of them needs, so it is built once:

* the manager and the webhook server (None when the process serves no webhooks);
* the API level's runtime steps (``trainer/runtime/levels``; the Configuration's ``apiLevel``)
  and its JobSet release's steps (``trainer/jobset/levels``);
* the runtimes: the controllers' (reads from the cache) and the webhooks' (a cache miss
  confirmed live, divergence T-3), each built once on first use, with their field indexes on
  the cache;
* ``require_kinds``: the one answer to "does the API server serve these CRDs?";
* event recorders by component name (core/v1 Events, and events.k8s.io/v1 Events for the
  levels whose controllers report through that API).

A ``setup`` returns False when it registered nothing (its CRDs are absent, or, for a
webhooks' setup, the process serves no webhooks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from manager import Manager
from manager.client.restmapper import NoKindMatch, RESTMapper
from manager.events import EventRecorder, EventsV1Recorder
from manager.scheme import GroupVersionKind
from manager.webhook.server import WebhookServer
from trainer.jobset.levels import JobSetLevel
from trainer.jobset.levels.v0_10 import V0_10
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.readers import CacheReader
from trainer.runtime.registry import Runtime, new_runtimes

__all__ = ["Setup", "SetupContext", "require_kinds"]


async def require_kinds(mapper: RESTMapper | None, *gvks: GroupVersionKind) -> bool:
    """Whether the API server serves every one of ``gvks`` (their CRDs are installed).

    Asked through the REST mapper (``Manager.mapper``); only "no such kind" answers False, any
    other discovery error propagates (a transient failure at start-up fails loudly instead of
    silently disabling controllers). Without a mapper (a unit-test fake) every kind is served.
    """
    if mapper is None:
        return True
    for gvk in gvks:
        try:
            await mapper.mapping(gvk)
        except NoKindMatch:
            return False
    return True


@dataclass
class SetupContext:
    """The one argument of every component's ``setup``; see the module docstring."""

    manager: Manager
    webhooks: WebhookServer | None = None
    #: upstream's ``--workers`` of the scheduler-plugins controllers (None: the manager's default)
    max_concurrent_reconciles: int | None = None
    #: how TrainJobs customise their runtime at the Configuration's apiLevel
    level: RuntimeLevel = V2_1
    #: the JobSet release's steps at the Configuration's apiLevel (``trainer/jobset/levels``)
    jobset_level: JobSetLevel = V0_10
    _runtimes: dict[str, Runtime] | None = field(default=None, init=False, repr=False)
    _admission_runtimes: dict[str, Runtime] | None = field(default=None, init=False, repr=False)

    async def require_kinds(self, *gvks: GroupVersionKind) -> bool:
        return await require_kinds(getattr(self.manager, "mapper", None), *gvks)

    def reader(self, *, confirm_misses: bool = False) -> CacheReader:
        """The cache-backed reader the runtimes read through (``confirm_misses``: the webhooks')."""
        return CacheReader(self.manager.cache, self.manager.api_reader, confirm_misses=confirm_misses)

    async def runtimes(self) -> dict[str, Runtime]:
        """The controllers' runtimes, built once; their field indexes are registered on the cache."""
        if self._runtimes is None:
            self._runtimes = await new_runtimes(
                self.reader(),
                self.manager.cache,
                level=self.level,
                writer=getattr(self.manager, "client", None),  # what v2.3's runtime snapshot is applied with
                confirmed_reader=self.reader(confirm_misses=True),  # MPI's immutable Secret (T-20)
            )
        return self._runtimes

    async def admission_runtimes(self) -> dict[str, Runtime]:
        """The webhooks' runtimes: same plugins, a cache miss confirmed live (divergence T-3).

        They register no index: the controllers' runtimes register the same ones on the cache.
        """
        if self._admission_runtimes is None:
            self._admission_runtimes = await new_runtimes(
                self.reader(confirm_misses=True), None, level=self.level
            )
        return self._admission_runtimes

    def event_recorder(self, component: str) -> EventRecorder:
        """The cluster's recorder for ``component`` (a recorder on the live client without one)."""
        make = getattr(self.manager.cluster, "event_recorder", None)
        if make is not None:
            recorder: EventRecorder = make(component)
            return recorder
        return EventRecorder(self.manager.api_reader, component=component)

    def events_recorder(self, component: str, action: str) -> EventsV1Recorder:
        """The cluster's events.k8s.io/v1 recorder for ``component`` writing ``action``
        (controller-runtime's ``GetEventRecorder``; a recorder on the live client without one)."""
        make = getattr(self.manager.cluster, "events_recorder", None)
        if make is not None:
            recorder: EventsV1Recorder = make(component, action)
            return recorder
        return EventsV1Recorder(self.manager.api_reader, reporting_controller=component, action=action)


Setup = Callable[[SetupContext], Awaitable[bool]]
