"""``make install`` / ``make uninstall``: the CRDs and the shipped runtimes on any cluster.

What is installed is ``config/local`` (the CRDs of ``config/crd``, the ClusterTrainingRuntimes
of ``config/runtimes`` and the webhook configurations of ``config/webhook``): ``install`` applies
the CRDs, waits until the API server serves them, then applies the runtimes, server-side, as
field manager ``trainer-install``. The webhook configurations are left to ``make run``, which
registers them as URLs to its own process (:func:`register_webhooks`), and to ``make deploy``,
which installs them pointing at the in-cluster Service. ``uninstall`` deletes what ``install``
added (the TrainJob CRD, the runtimes, the other CRDs, each waited for until it is gone) and any
webhook configuration a ``make run`` left behind.

The kustomizations are read here with a minimal reader (``resources:`` only, which is all
``config/local`` uses), so ``make install`` and ``make run`` need no kubectl; a unit test checks
that it renders what ``kubectl kustomize`` renders.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog
import yaml

from manager.client import Client
from manager.client.errors import NotFound, RequestError
from manager.client.patch import Patch
from manager.client.restmapper import NoKindMatch
from manager.cluster import Cluster
from manager.config import RestConfigError, get_config
from manager.scheme import GroupVersionKind
from trainer.api.trainer_constants import ResourceInUseFinalizer

log = structlog.get_logger("install")

ROOT = Path(__file__).resolve().parent.parent
LOCAL_DIR = ROOT / "config" / "local"
FIELD_MANAGER = "trainer-install"
RUN_FIELD_MANAGER = "trainer-make-run"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
CRD_GVK = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
RESOURCE_IN_USE = ResourceInUseFinalizer
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_FIELDS = {"apiVersion", "kind", "resources"}
# The CRDs are ~3 MB of YAML: libyaml parses them in a fraction of the pure-Python time.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Json = dict[str, Any]


class InstallError(Exception):
    """A manifest cannot be read or the cluster refused or never finished a step."""


# -- reading config/ -----------------------------------------------------------------------------


def _kustomization(directory: Path) -> Path | None:
    return next((directory / n for n in KUSTOMIZATION_FILES if (directory / n).is_file()), None)


def render(directory: Path = LOCAL_DIR) -> list[Json]:
    """The objects of a kustomization that only lists ``resources`` (files or kustomizations)."""
    path = _kustomization(directory)
    if path is None:
        raise InstallError(f"{directory}: no kustomization.yaml")
    spec = yaml.safe_load(path.read_text()) or {}
    unsupported = sorted(set(spec) - SUPPORTED_FIELDS)
    if unsupported:
        raise InstallError(
            f"{path}: field(s) {', '.join(unsupported)} are not supported by the built-in reader "
            "(only resources:); render it with `kubectl kustomize` instead"
        )
    docs: list[Json] = []
    for entry in spec.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            docs += render(target)
        elif target.is_file():
            docs += [
                d for d in yaml.load_all(target.read_text(), Loader=_Loader) if isinstance(d, dict) and d
            ]
        else:
            raise InstallError(f"{path}: resource {entry!r} does not exist")
    return docs


def split(docs: Iterable[Json]) -> tuple[list[Json], list[Json], list[Json]]:
    """CRDs, the other installed objects (runtimes), webhook configurations."""
    crds, objects, hooks = [], [], []
    for doc in docs:
        kind = doc.get("kind")
        if kind == "CustomResourceDefinition":
            crds.append(doc)
        elif kind in WEBHOOK_KINDS:
            hooks.append(doc)
        else:
            objects.append(doc)
    return crds, objects, hooks


def _gvk(doc: Json) -> GroupVersionKind:
    group, _, version = str(doc["apiVersion"]).rpartition("/")
    return GroupVersionKind(group, version, str(doc["kind"]))


def _ref(doc: Json) -> str:
    meta = doc.get("metadata") or {}
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{doc['kind']}/{namespace}{meta.get('name', '')}"


# -- install / uninstall -------------------------------------------------------------------------


async def _wait_served(client: Client, crds: list[Json], timeout: float) -> None:
    """Until every CRD is Established and each served version lists its resource in discovery."""
    deadline = time.monotonic() + timeout
    for crd in crds:
        name, spec = crd["metadata"]["name"], crd["spec"]
        while True:
            live = await client.get(CRD_GVK, name)
            conditions = {c["type"]: c["status"] for c in (live.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise InstallError(f"CustomResourceDefinition {name} is not Established after {timeout:g}s")
            await asyncio.sleep(0.2)
        plural = spec["names"]["plural"]
        for version in (v["name"] for v in spec["versions"] if v.get("served", True)):
            while True:
                try:
                    body = await client.transport.request("GET", f"/apis/{spec['group']}/{version}")
                except NotFound:
                    body = {}
                if any(r.get("name") == plural for r in body.get("resources", [])):
                    break
                if time.monotonic() > deadline:
                    raise InstallError(f"{plural}.{spec['group']}/{version} is not served after {timeout:g}s")
                await asyncio.sleep(0.2)


async def _apply(client: Client, doc: Json, field_manager: str) -> None:
    try:
        await client.apply(doc, field_owner=field_manager, force=True)
    except NoKindMatch as err:
        raise InstallError(f"{_ref(doc)}: the API server does not serve {err}") from err
    except RequestError as err:
        raise InstallError(f"{_ref(doc)}: {err}") from err


async def install(client: Client, docs: list[Json] | None = None, *, timeout: float = 60.0) -> list[str]:
    """Apply the CRDs, wait until they are served, then the runtimes; returns what was applied."""
    crds, objects, _ = split(render() if docs is None else docs)
    for crd in crds:
        await _apply(client, crd, FIELD_MANAGER)
    await _wait_served(client, crds, timeout)
    for obj in objects:
        await _apply(client, obj, FIELD_MANAGER)
    return [_ref(d) for d in (*crds, *objects)]


async def _gone(client: Client, doc: Json) -> bool:
    meta = doc["metadata"]
    try:
        await client.get(_gvk(doc), meta["name"], meta.get("namespace") or "")
    except (NotFound, NoKindMatch):
        return True
    return False


async def _release_in_use(client: Client, doc: Json) -> bool:
    """Drop the ``resource-in-use`` finalizer of a runtime being deleted once no TrainJob can exist.

    That is what the runtime controller does when no TrainJob uses the runtime any more; with
    the TrainJob CRD gone (deleted first) none can, and no manager may be running to do it.
    """
    meta = doc["metadata"]
    try:
        live = await client.get(_gvk(doc), meta["name"], meta.get("namespace") or "")
    except (NotFound, NoKindMatch):
        return False
    finalizers = (live.get("metadata") or {}).get("finalizers") or []
    if not live["metadata"].get("deletionTimestamp") or RESOURCE_IN_USE not in finalizers:
        return False
    remaining = [f for f in finalizers if f != RESOURCE_IN_USE]
    await client.patch(live, Patch.merge({"metadata": {"finalizers": remaining or None}}))
    log.info("released a runtime no TrainJob can use any more", runtime=_ref(doc))
    return True


async def _delete_and_wait(
    client: Client, docs: list[Json], timeout: float, *, release_in_use: bool = False
) -> list[str]:
    deleted = []
    for doc in docs:
        meta = doc["metadata"]
        try:
            await client.delete_by_name(_gvk(doc), meta["name"], meta.get("namespace") or "")
            deleted.append(_ref(doc))
        except (NotFound, NoKindMatch):
            continue
    deadline = time.monotonic() + timeout
    for doc in docs:
        while not await _gone(client, doc):
            if release_in_use:
                await _release_in_use(client, doc)
            if time.monotonic() > deadline:
                meta = doc["metadata"]
                live = await client.get(_gvk(doc), meta["name"], meta.get("namespace") or "")
                finalizers = (live.get("metadata") or {}).get("finalizers") or []
                raise InstallError(
                    f"{_ref(doc)} is still there after {timeout:g}s (finalizers {finalizers}); "
                    "a finalizer is removed by the controller that set it: is it running?"
                )
            await asyncio.sleep(0.2)
    return deleted


async def uninstall(client: Client, docs: list[Json] | None = None, *, timeout: float = 120.0) -> list[str]:
    """Delete what :func:`install` added and webhooks a ``make run`` left; returns what was deleted.

    The TrainJob CRD goes first (its TrainJobs with it, their JobSets by garbage collection), so
    the runtimes' ``resource-in-use`` finalizers can be released; then the runtimes, then the
    other CRDs.
    """
    crds, objects, hooks = split(render() if docs is None else docs)
    deleted = await remove_run_webhooks(client, hooks)
    trainjobs = [c for c in crds if c["metadata"]["name"] == TRAINJOB_CRD]
    deleted += await _delete_and_wait(client, trainjobs, timeout)
    deleted += await _delete_and_wait(client, objects, timeout, release_in_use=True)
    deleted += await _delete_and_wait(client, [c for c in crds if c not in trainjobs], timeout)
    return deleted


# -- webhooks of a manager outside the cluster ---------------------------------------------------


def _is_url_form(live: Json) -> bool:
    return any("url" in (h.get("clientConfig") or {}) for h in live.get("webhooks") or [])


async def remove_run_webhooks(client: Client, hooks: list[Json]) -> list[str]:
    """Delete the configurations a ``make run`` registered (URL form); a deployment's stay."""
    removed = []
    for doc in hooks:
        try:
            live = await client.get(_gvk(doc), doc["metadata"]["name"])
        except NotFound:
            continue
        if _is_url_form(live):
            await client.delete_by_name(_gvk(doc), doc["metadata"]["name"])
            removed.append(_ref(doc))
    return removed


async def register_webhooks(
    client: Client, hooks: list[Json], *, host: str, port: int, ca_pem: bytes
) -> list[str]:
    """Apply the configurations with every Service reference turned into ``https://host:port/path``.

    Refused when a configuration of that name calls a Service: it belongs to an in-cluster
    deployment, which this would cut off.
    """
    bundle = base64.b64encode(ca_pem).decode()
    names = []
    for doc in hooks:
        name = doc["metadata"]["name"]
        try:
            live = await client.get(_gvk(doc), name)
        except NotFound:
            live = None
        if live is not None and not _is_url_form(live):
            raise InstallError(
                f"{_ref(doc)} calls an in-cluster Service (a `make deploy` or Helm install): "
                "remove that deployment first (`make undeploy`), or run without WEBHOOK_HOST"
            )
        local = {**doc, "webhooks": []}
        for hook in doc.get("webhooks") or []:
            client_config = dict(hook.get("clientConfig") or {})
            service = client_config.pop("service", None) or {}
            client_config["url"] = f"https://{url_host(host)}:{port}{service.get('path', '')}"
            client_config["caBundle"] = bundle
            local["webhooks"].append({**hook, "clientConfig": client_config})
        await _apply(client, local, RUN_FIELD_MANAGER)
        names.append(name)
    return names


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# -- CLI -----------------------------------------------------------------------------------------


async def _run(command: str, kubeconfig: str | None) -> int:
    try:
        rest = await get_config(kubeconfig)
    except RestConfigError as err:
        print(f"make {command}: {err}", file=sys.stderr)
        return 1
    async with Cluster(rest, field_owner=FIELD_MANAGER) as cluster:
        client = cluster.api_reader
        try:
            if command == "install":
                done = await install(client)
                print(f"make install: applied {len(done)} objects: {', '.join(done)}", file=sys.stderr)
            else:
                done = await uninstall(client)
                print(f"make uninstall: deleted {len(done)} objects: {', '.join(done)}", file=sys.stderr)
        except InstallError as err:
            print(f"make {command}: {err}", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.install", description=__doc__)
    parser.add_argument("command", choices=["install", "uninstall"])
    parser.add_argument(
        "--kubeconfig", default=None, help="kubeconfig (default: KUBECONFIG, then ~/.kube/config)"
    )
    args = parser.parse_args(argv)
    return asyncio.run(_run(args.command, args.kubeconfig))


if __name__ == "__main__":
    sys.exit(main())
