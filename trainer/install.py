"""``make install`` / ``make uninstall``: the CRDs and the shipped runtimes on any cluster.

What is installed is the ``local_manifests`` of the API level (``--level``, ``make install
LEVEL=...``; docs/levels.md): at v2.1 ``config/local`` (the CRDs of ``config/crd``, the
ClusterTrainingRuntimes of ``config/runtimes`` and the webhook configurations of
``config/webhook``), at v2.3 ``config/overlays/v2.3/local`` (that level's CRDs, Trainer v2.3.0's
runtimes of ``config/overlays/v2.3/runtimes``, the ConfigMap ``kubeflow-trainer-public`` with its
Role and RoleBinding in ``kubeflow-system``, and that level's webhook configurations).
``install`` applies the CRDs, waits until the API server serves them, then the other objects
in order, server-side, as field manager ``trainer-install``. The webhook configurations are left to ``make run``, which
registers them as URLs to its own process (:func:`register_webhooks`), and to ``make deploy``,
which installs them pointing at the in-cluster Service. ``uninstall`` deletes what ``install``
added (the TrainJob CRD, the runtimes and other objects, the other CRDs, each waited for until it
is gone; a Namespace is left, it may hold more than this installed) and any webhook
configuration a ``make run`` left behind.

``delete_runtimes`` (``trainer-controller-manager delete-runtimes``) is what the Helm chart's
pre-delete hook runs: the release's ClusterTrainingRuntimes deleted while the manager still runs,
and waited for (docs/behaviour/trainer.md §12.17).

The kustomizations are read here with a minimal reader (``resources:`` only, which is all
the local manifests use), so ``make install`` and ``make run`` need no kubectl; a unit test checks
that it renders what ``kubectl kustomize`` renders.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog
import yaml

from manager.client import Client
from manager.client.errors import Forbidden, NotFound, RequestError
from manager.client.patch import Patch
from manager.client.restmapper import NoKindMatch
from manager.cluster import Cluster
from manager.config import RestConfigError, get_config
from manager.meta.duration import parse_duration
from manager.meta.object import Json
from manager.scheme import GroupVersionKind
from trainer import levels
from trainer.api.trainer_constants import ResourceInUseFinalizer
from trainer.levels import ApiLevel
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINJOB_GVK

log = structlog.get_logger("install")

ROOT = Path(__file__).resolve().parent.parent
LOCAL_DIR = ROOT / "config" / levels.DEFAULT.local_manifests
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


class InstallError(Exception):
    """A manifest cannot be read or the cluster refused or never finished a step."""


# -- reading config/ -----------------------------------------------------------------------------


def _kustomization(directory: Path) -> Path | None:
    return next((directory / n for n in KUSTOMIZATION_FILES if (directory / n).is_file()), None)


def local_dir(level: ApiLevel) -> Path:
    """What ``make install``/``make run`` install at ``level`` (``ApiLevel.local_manifests``)."""
    return ROOT / "config" / level.local_manifests


def resource_files(directory: Path = LOCAL_DIR) -> list[Path]:
    """The files a kustomization that only lists ``resources`` (files or kustomizations) names, in order."""
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
    files: list[Path] = []
    for entry in spec.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            files += resource_files(target)
        elif target.is_file():
            files.append(target)
        else:
            raise InstallError(f"{path}: resource {entry!r} does not exist")
    return files


def _load(path: Path) -> list[Json]:
    return [d for d in yaml.load_all(path.read_text(), Loader=_Loader) if isinstance(d, dict) and d]


def render(directory: Path = LOCAL_DIR) -> list[Json]:
    """The objects of a kustomization that only lists ``resources`` (files or kustomizations)."""
    return [doc for path in resource_files(directory) for doc in _load(path)]


def crd_files(level: ApiLevel) -> list[Path]:
    """The files of ``level``'s local manifests that hold its CRDs (``make cluster-up LEVEL=...``)."""
    return [
        path
        for path in resource_files(local_dir(level))
        if any(d.get("kind") == "CustomResourceDefinition" for d in _load(path))
    ]


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
    # A Namespace stays: it may hold what others put there (a deployment, their own objects).
    objects = [o for o in objects if o.get("kind") != "Namespace"]
    deleted += await _delete_and_wait(client, objects, timeout, release_in_use=True)
    deleted += await _delete_and_wait(client, [c for c in crds if c not in trainjobs], timeout)
    return deleted


# -- the Helm chart's pre-delete hook ------------------------------------------------------------


async def _trainjobs_naming(client: Client, names: Iterable[str]) -> dict[str, list[str]]:
    """``namespace/name`` of the TrainJobs whose ``runtimeRef`` names each ClusterTrainingRuntime
    of ``names`` (the kind a runtimeRef defaults to); empty when TrainJobs cannot be listed."""
    wanted = set(names)
    try:
        trainjobs = await client.list(TRAINJOB_GVK)
    except (NotFound, NoKindMatch, Forbidden):
        return {}
    naming: dict[str, list[str]] = {}
    for job in trainjobs:
        ref = (job.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("name") in wanted and ref.get("kind", CLUSTER_TRAINING_RUNTIME_GVK.kind) == (
            CLUSTER_TRAINING_RUNTIME_GVK.kind
        ):
            meta = job["metadata"]
            naming.setdefault(str(ref["name"]), []).append(f"{meta.get('namespace', '')}/{meta['name']}")
    return naming


async def _still_there(client: Client, names: list[str]) -> dict[str, list[str]]:
    """The runtimes of ``names`` that still exist, with their finalizers."""
    left: dict[str, list[str]] = {}
    for name in names:
        try:
            live = await client.get(CLUSTER_TRAINING_RUNTIME_GVK, name)
        except (NotFound, NoKindMatch):
            continue
        left[name] = list((live.get("metadata") or {}).get("finalizers") or [])
    return left


async def _waiting(client: Client, left: dict[str, list[str]]) -> str:
    naming = await _trainjobs_naming(client, left)
    parts = []
    for name, finalizers in left.items():
        held = f"finalizers {', '.join(finalizers)}" if finalizers else "no finalizer"
        users = naming.get(name)
        parts.append(f"{name} ({held}{'; named by TrainJobs ' + ', '.join(users) if users else ''})")
    hint = (
        f"; the manager removes {RESOURCE_IN_USE} once no TrainJob names the runtime: delete those TrainJobs"
        if any(RESOURCE_IN_USE in f for f in left.values())
        else ""
    )
    return f"waiting for ClusterTrainingRuntimes to be deleted: {'; '.join(parts)}{hint}"


async def delete_runtimes(
    client: Client,
    selector: str,
    *,
    timeout: float = 0.0,
    interval: float = 1.0,
    report_every: float = 10.0,
    out: Any = sys.stdout,
) -> list[str]:
    """What the chart's pre-delete hook runs before Helm deletes the release (upstream v2.3.0's
    ``kubectl delete clustertrainingruntime --selector=... --ignore-not-found``): delete the
    ClusterTrainingRuntimes ``selector`` picks, then wait until they are gone, so the manager,
    still running, drops the ``resource-in-use`` finalizer that level v2.1 sets while TrainJobs
    name a runtime. At once and then every ``report_every`` seconds it says which are left and
    which TrainJobs hold them; with ``timeout`` (seconds, 0: until they are gone, as kubectl) it then raises
    :class:`InstallError` saying the same. No runtime, or no ClusterTrainingRuntime API, is not
    an error. Returns the names deleted."""
    try:
        runtimes = await client.list(CLUSTER_TRAINING_RUNTIME_GVK, label_selector=selector)
    except NoKindMatch:
        print("no ClusterTrainingRuntime API in this cluster: nothing to delete", file=out, flush=True)
        return []
    names = [str(r["metadata"]["name"]) for r in runtimes]
    for name in names:
        with contextlib.suppress(NotFound):
            await client.delete_by_name(CLUSTER_TRAINING_RUNTIME_GVK, name)
            print(f'clustertrainingruntime.trainer.kubeflow.org "{name}" deleted', file=out, flush=True)
    if not names:
        print(f"no ClusterTrainingRuntime matches {selector!r}: nothing to delete", file=out, flush=True)
    started = time.monotonic()
    reported: float | None = None  # the first wait is reported at once: what holds the runtimes
    while left := await _still_there(client, names):
        now = time.monotonic()
        if timeout and now - started >= timeout:
            raise InstallError(f"after {timeout:g}s, {await _waiting(client, left)}")
        if reported is None or now - reported >= report_every:
            print(await _waiting(client, left), file=out, flush=True)
            reported = now
        await asyncio.sleep(interval)
    return names


def delete_runtimes_main(argv: list[str]) -> int:
    """``trainer-controller-manager delete-runtimes``: the chart's pre-delete hook's command."""
    parser = argparse.ArgumentParser(
        prog="trainer-controller-manager delete-runtimes",
        description="Delete the ClusterTrainingRuntimes a label selector picks and wait until they are "
        "gone (the Helm chart's pre-delete hook; charts/kubeflow-trainer).",
    )
    parser.add_argument(
        "-l",
        "--selector",
        required=True,
        help="label selector of the runtimes, e.g. app.kubernetes.io/instance=x",
    )
    parser.add_argument(
        "--timeout",
        default="0s",
        help="how long to wait for them to be gone (a Go duration; 0s, the default: until they are)",
    )
    parser.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, in-cluster)")
    args = parser.parse_args(argv)
    try:
        timeout = parse_duration(args.timeout)
    except ValueError as err:
        print(f"delete-runtimes: --timeout: {err}", file=sys.stdout)
        return 2
    if timeout < 0:
        print(f"delete-runtimes: --timeout: must not be negative: {args.timeout!r}", file=sys.stdout)
        return 2
    return asyncio.run(_delete_runtimes(args.selector, timeout, args.kubeconfig or None))


async def _delete_runtimes(selector: str, timeout: float, kubeconfig: str | None) -> int:
    try:
        rest = await get_config(kubeconfig)
    except RestConfigError as err:
        print(f"delete-runtimes: unable to get kubeconfig: {err}", file=sys.stdout)
        return 1
    async with Cluster(rest, field_owner=FIELD_MANAGER) as cluster:
        try:
            deleted = await delete_runtimes(cluster.api_reader, selector, timeout=timeout)
        except (InstallError, RequestError) as err:
            print(f"delete-runtimes: {err}", file=sys.stdout)
            return 1
    print(f"delete-runtimes: {len(deleted)} ClusterTrainingRuntimes gone", file=sys.stdout, flush=True)
    return 0


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


async def _run(command: str, kubeconfig: str | None, level: ApiLevel = levels.DEFAULT) -> int:
    try:
        rest = await get_config(kubeconfig)
    except RestConfigError as err:
        print(f"make {command}: {err}", file=sys.stderr)
        return 1
    async with Cluster(rest, field_owner=FIELD_MANAGER) as cluster:
        client = cluster.api_reader
        try:
            docs = render(local_dir(level))
            if command == "install":
                done = await install(client, docs)
                print(
                    f"make install: applied {len(done)} objects of level {level.name}: {', '.join(done)}",
                    file=sys.stderr,
                )
            else:
                done = await uninstall(client, docs)
                print(f"make uninstall: deleted {len(done)} objects: {', '.join(done)}", file=sys.stderr)
        except InstallError as err:
            print(f"make {command}: {err}", file=sys.stderr)
            return 1
    return 0


def _paths(what: str, level: ApiLevel) -> list[Path]:
    """The level's manifests the Makefile hands to other tools (``paths`` subcommand)."""
    if what == "crds":
        return crd_files(level)
    config = ROOT / "config"
    return [config / {"manifests": level.manifests, "runtimes": level.runtimes}[what]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.install", description=__doc__)
    parser.add_argument(
        "command",
        choices=["install", "uninstall", "paths"],
        help="paths: print the level's WHAT (relative to the repository) for the Makefile",
    )
    parser.add_argument(
        "what",
        nargs="?",
        choices=["crds", "manifests", "runtimes"],
        help="with paths: the level's CRD files, its deployment kustomization (make deploy), "
        "its shipped runtimes",
    )
    parser.add_argument(
        "--kubeconfig", default=None, help="kubeconfig (default: KUBECONFIG, then ~/.kube/config)"
    )
    parser.add_argument(
        "--level",
        default=levels.DEFAULT.name,
        help=f"the API level whose manifests are installed ({', '.join(levels.LEVELS)}; default "
        f"{levels.DEFAULT.name})",
    )
    args = parser.parse_args(argv)
    name = "make" if args.command == "paths" else f"make {args.command}"
    try:
        level = levels.get(args.level)
    except ValueError as err:
        print(f"{name}: LEVEL={args.level}: {err}", file=sys.stderr)
        return 2
    if args.command == "paths":
        if args.what is None:
            parser.error("paths needs WHAT (crds, manifests or runtimes)")
        print(" ".join(str(p.relative_to(ROOT)) for p in _paths(args.what, level)))
        return 0
    return asyncio.run(_run(args.command, args.kubeconfig, level))


if __name__ == "__main__":
    sys.exit(main())
