"""A controller-runtime-style framework for Kubernetes controllers on asyncio.

The core pieces are re-exported here::

    from manager import Builder, Manager, Options, Request, Result, TerminalError

Client, cache and webhook server live in their own subpackages (``manager.client``,
``manager.cache``, ``manager.webhook``); ``manager.Error`` is the root of every exception the
framework raises (``manager.errors``). The layout, one job per module, is in ``manager/README.md``.
"""

from manager.controller import (
    Builder,
    ChannelSource,
    Controller,
    ReconcileError,
    Reconciler,
    Request,
    Result,
    TerminalError,
    and_,
    annotations_changed,
    enqueue_for_object,
    enqueue_for_owner,
    enqueue_from_map,
    generation_changed,
    label_selector,
    labels_changed,
    not_,
    or_,
    resource_version_changed,
)
from manager.controller import Options as ControllerOptions
from manager.errors import Error
from manager.manager import LeaderElectionLost, Manager, Options, ShutdownTimeoutError
from manager.runnable import Runnable
from manager.scheme import GroupVersionKind, ObjectKey

__all__ = [
    "Builder",
    "ChannelSource",
    "Controller",
    "ControllerOptions",
    "Error",
    "GroupVersionKind",
    "LeaderElectionLost",
    "Manager",
    "ObjectKey",
    "Options",
    "ReconcileError",
    "Reconciler",
    "Request",
    "Result",
    "Runnable",
    "ShutdownTimeoutError",
    "TerminalError",
    "and_",
    "annotations_changed",
    "enqueue_for_object",
    "enqueue_for_owner",
    "enqueue_from_map",
    "generation_changed",
    "label_selector",
    "labels_changed",
    "not_",
    "or_",
    "resource_version_changed",
]
