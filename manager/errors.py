"""The root of the framework's exception tree: every error ``manager`` raises is a ``manager.Error``.

Where errors live (each next to the code that raises it):

- ``manager.client.errors``: a request to the API server failed (``RequestError``): either it got
  a non-success answer (``ApiError``, split into ``ClientError`` for the caller's mistakes and
  ``ServerError`` for the server's trouble) or no answer at all (``TransportError``).
- ``manager.client.restmapper.NoKindMatch``: the kind is not served.
- ``manager.config.RestConfigError``, ``manager.cache.CacheError``, ``manager.workqueue.ShutDownError``,
  ``manager.controller.TerminalError``/``ReconcileError``/``CacheSyncTimeoutError``,
  ``manager.manager.LeaderElectionLost``/``ShutdownTimeoutError``,
  ``manager.health.CheckFailedError``, ``manager.controller_util.OwnerReferenceError``,
  ``manager.envtest.errors.EnvtestError``.

Catching ``manager.Error`` therefore means "anything the framework reported", never a bug such
as a ``TypeError`` in the caller's own code.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every exception the framework raises on purpose."""
