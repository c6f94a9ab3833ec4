"""How to reach the API server: host, TLS, and credentials, loaded the way client-go does.

kubernetes_asyncio's loaders do the parsing (kubeconfig with exec plugins and OIDC, in-cluster
service account); this module turns the result into a ``RestConfig`` the framework's own HTTP
client uses. The loaders are imported without the package's generated API client, which the
framework never uses (see ``_import_loaders``). Precedence mirrors controller-runtime's
``GetConfig``: an explicit path, then ``KUBECONFIG``, then in-cluster, then ``~/.kube/config``.

In-cluster config reads the pod's service-account mount
(``/var/run/secrets/kubernetes.io/serviceaccount``: ``token``, ``ca.crt``, ``namespace``); the
environment variable ``KUBERNETES_SERVICE_ACCOUNT_DIR`` points it at another directory (ours, not
Kubernetes': tests run the manager "in cluster" outside a Pod with it).

Client-side rate limiting is off by default (``qps=None``), as controller-runtime sets QPS=-1
and relies on API Priority and Fairness.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from manager.errors import Error

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client

TokenSource = Callable[[], Awaitable[str | None]]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_DIR_ENV = "KUBERNETES_SERVICE_ACCOUNT_DIR"


def _api_client(*args: Any, **kwargs: Any) -> Any:
    """Stands in for ``client.ApiClient`` in the loaders, which only construct one in
    ``new_client_from_config*`` (never called here): it imports the real one when called."""
    from kubernetes_asyncio.client import ApiClient

    return ApiClient(*args, **kwargs)


def _import_loaders() -> tuple[type[k8s_client.Configuration], ModuleType]:
    """kubernetes_asyncio's ``Configuration`` and ``config`` loaders, without its API client.

    Importing any part of kubernetes_asyncio runs its package ``__init__``, which imports the
    generated API client and its 700-odd model classes: 37 MB of RSS in every process
    (docs/bench.md) for loaders that need one class. Here the two packages are stood in for by
    empty ones (their real ``__path__``) while the loaders' own modules are imported, and every
    ``kubernetes_asyncio`` entry is then taken out of ``sys.modules`` again: the loaders are this
    module's private copy, and a later ``import kubernetes_asyncio`` (a user's code, the tests)
    runs the real package from the start, as if this had never happened. A process that imported
    kubernetes_asyncio already just uses it.
    """
    if "kubernetes_asyncio" not in sys.modules:
        try:
            return _import_loaders_alone()
        except Exception:  # a layout this does not know: import the package whole
            pass
    from kubernetes_asyncio import client as whole_client
    from kubernetes_asyncio import config as whole_loaders

    return whole_client.Configuration, whole_loaders


def _import_loaders_alone() -> tuple[type[k8s_client.Configuration], ModuleType]:
    root = _empty_package("kubernetes_asyncio", None)
    client = _empty_package("kubernetes_asyncio.client", root.__path__)
    setattr(root, "client", client)  # noqa: B010 - attributes of a module made here
    sys.modules.update({root.__name__: root, client.__name__: client})
    try:
        configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
        setattr(client, "Configuration", configuration.Configuration)  # noqa: B010
        setattr(client, "ApiClient", _api_client)  # noqa: B010 - the loaders import the name
        loaders = importlib.import_module("kubernetes_asyncio.config")
    finally:
        for name in [n for n in sys.modules if n.partition(".")[0] == "kubernetes_asyncio"]:
            del sys.modules[name]
    found: type[k8s_client.Configuration] = configuration.Configuration
    return found, loaders


def _empty_package(name: str, parent_path: Sequence[str] | None) -> ModuleType:
    # the path finder, not importlib.util.find_spec: that would import the parent package
    spec = importlib.machinery.PathFinder.find_spec(name, None if parent_path is None else list(parent_path))
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{name} is not a package here")
    package = ModuleType(name)
    package.__spec__ = spec
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = name
    return package


_Configuration, _loaders = _import_loaders()


def service_account_dir() -> Path:
    """Where the pod's service account is mounted (``KUBERNETES_SERVICE_ACCOUNT_DIR`` overrides it)."""
    return Path(os.environ.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT_DIR)


class RestConfigError(Error):
    """No usable cluster configuration was found or it could not be loaded."""


@dataclass
class RestConfig:
    """Everything needed to open connections to one API server.

    ``ssl_context`` for an ``https`` host; without one the server is verified against the
    system's CAs. ``token_source`` is awaited before each request so rotating credentials (projected service
    account tokens, exec plugins) are picked up without rebuilding the client.
    """

    host: str
    ssl_context: ssl.SSLContext | None = None
    token_source: TokenSource | None = None
    qps: float | None = None
    burst: int = 10
    timeout: float = 60.0
    user_agent: str = "trainer-controller-manager"

    async def authorization(self) -> str | None:
        """The ``Authorization`` header value, refreshed if the source rotates it."""
        if self.token_source is None:
            return None
        return await self.token_source()


def _ssl_context(cfg: k8s_client.Configuration) -> ssl.SSLContext | None:
    if not str(cfg.host).startswith("https"):
        return None
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _token_source(
    cfg: k8s_client.Configuration, reload: Callable[[], Awaitable[None]] | None, refresh_interval: float
) -> TokenSource:
    """A token source reading ``api_key['BearerToken']`` through kubernetes_asyncio's hook.

    In-cluster loading installs a refresh hook that re-reads the token file when it ages;
    kubeconfig exec/OIDC credentials are re-loaded every ``refresh_interval`` seconds by ``reload``.
    """
    last_reload = time.monotonic()

    async def source() -> str | None:
        nonlocal last_reload
        if reload is not None and time.monotonic() - last_reload >= refresh_interval:
            last_reload = time.monotonic()
            await reload()
        token = await cfg.get_api_key_with_prefix("BearerToken")
        if not token:
            return None
        token = str(token)
        return token if token.lower().startswith("bearer ") else f"Bearer {token}"

    return source


def from_client_configuration(
    cfg: k8s_client.Configuration,
    reload: Callable[[], Awaitable[None]] | None = None,
    refresh_interval: float = 60.0,
) -> RestConfig:
    """Convert a loaded kubernetes_asyncio ``Configuration``."""
    return RestConfig(
        host=str(cfg.host).rstrip("/"),
        ssl_context=_ssl_context(cfg),
        token_source=_token_source(cfg, reload, refresh_interval),
    )


async def load_kubeconfig(
    path: str | Path | None = None, context: str | None = None, *, refresh_interval: float = 60.0
) -> RestConfig:
    """Load a kubeconfig file (``~/.kube/config`` when ``path`` is None).

    Exec-plugin and auth-provider credentials are re-obtained every ``refresh_interval`` seconds.
    """
    cfg = _Configuration()
    try:
        loader = await _loaders.load_kube_config(
            config_file=str(path) if path else None,
            context=context,
            client_configuration=cfg,
            persist_config=False,
        )
    except Exception as err:  # the loader raises several unrelated types
        raise RestConfigError(f"cannot load kubeconfig {path or '~/.kube/config'}: {err}") from err

    user: Any = getattr(loader, "_user", None)
    needs_refresh = bool(user) and any(key in user for key in ("exec", "auth-provider"))

    async def reload() -> None:
        await loader.load_and_set(cfg)

    return from_client_configuration(cfg, reload if needs_refresh else None, refresh_interval)


def load_incluster(token_file: str | None = None, cert_file: str | None = None) -> RestConfig:
    """Load the pod's service account credentials (token re-read as it rotates).

    Files default to ``token`` and ``ca.crt`` in :func:`service_account_dir`.
    """
    cfg = _Configuration()
    directory = service_account_dir()
    kwargs: dict[str, str] = {
        "token_filename": token_file or str(directory / "token"),
        "cert_filename": cert_file or str(directory / "ca.crt"),
    }
    try:
        _loaders.load_incluster_config(client_configuration=cfg, **kwargs)
    except _loaders.ConfigException as err:
        raise RestConfigError(f"not running in a cluster: {err}") from err
    return from_client_configuration(cfg)


async def get_config(kubeconfig: str | Path | None = None, context: str | None = None) -> RestConfig:
    """controller-runtime's precedence: explicit path, KUBECONFIG, in-cluster, ~/.kube/config."""
    if kubeconfig:
        return await load_kubeconfig(kubeconfig, context)
    env = os.environ.get("KUBECONFIG")
    if env:
        return await load_kubeconfig(env.split(os.pathsep)[0], context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return load_incluster()
    default = Path.home() / ".kube" / "config"
    if default.exists():
        return await load_kubeconfig(default, context)
    raise RestConfigError("no kubeconfig given, KUBECONFIG unset, not in a cluster, and no ~/.kube/config")
