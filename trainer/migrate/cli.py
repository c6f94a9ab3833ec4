"""``trainer-controller-manager migrate --to v2.3 [--dry-run]`` (docs/migration.md).

What it does, in this order:

1. reads the TrainJob CRD and tells which it is (v2.1's, the bridge of
   ``config/migration/v2.1-to-v2.3``, or v2.3's); writing needs the bridge (v2.1's would prune
   ``runtimePatches`` and re-default the runtimes' ``numProcPerNode``; v2.3's hides the v2.1
   fields and makes ``spec.trainer`` immutable), so without ``--dry-run`` any other is refused;
2. lists every TrainJob, TrainingRuntime and ClusterTrainingRuntime through the API and
   translates each (``trainer.migrate.v2_3``), the TrainJobs from the runtimes as stored, before
   any runtime is changed;
3. prints a unified YAML diff of each object's ``spec`` (and ``metadata.finalizers``) that
   changes, with notes;
4. refuses, naming each object and field, if any object cannot be translated: then nothing is
   written (exit 1);
5. every update is sent with ``dryRun=All`` (the API server's schema, CEL rules and admission
   see the whole plan; a pruned field is caught here; with ``--dry-run`` only over the bridge,
   the one CRD that can store the plan); without ``--dry-run`` they are then written, each
   an update carrying the resourceVersion read (a concurrent change answers 409 and stops the
   run: run it again). TrainJobs are written before the runtimes, so a run cut short recomputes
   the TrainJobs from runtimes still unchanged.

A second run finds nothing to change and writes nothing ("nothing to change").
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import difflib
import sys
from collections.abc import Iterable
from typing import Any, TextIO

import yaml

from manager.client import Client
from manager.client.errors import NotFound, RequestError
from manager.cluster import Cluster
from manager.config import RestConfigError, get_config
from manager.meta.object import Json
from manager.scheme import GroupVersionKind
from trainer.api import trainer_constants as tc
from trainer.migrate import crds
from trainer.migrate.v2_3 import Translation, translate_runtime, translate_trainjob
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

__all__ = ["FIELD_MANAGER", "main", "migrate"]

FIELD_MANAGER = "trainer-controller-manager-migrate"
"""The field manager of migrate's updates (``metadata.managedFields``)."""
CRD_GVK = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
RUNTIME_CRDS = ("trainingruntimes.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org")
BRIDGE_APPLY = "kubectl apply --server-side -k config/migration/v2.1-to-v2.3"
TARGETS = ("v2.3",)


class MigrateError(Exception):
    """Stops the run with a message (exit 1)."""


def _yaml(doc: Any) -> list[str]:
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
    return text.splitlines(keepends=True)


def _where(t: Translation) -> str:
    return f"{t.kind} {t.namespace}/{t.name}" if t.namespace else f"{t.kind} {t.name}"


def diff(t: Translation) -> str:
    """The unified diff of the object's ``spec``, as YAML."""
    lines = difflib.unified_diff(
        _yaml(_shown(t.before, t.after)),
        _yaml(_shown(t.after, t.before)),
        fromfile=f"{_where(t)} (v2.1)",
        tofile=f"{_where(t)} (v2.3)",
    )
    return "".join(lines)


def _shown(obj: Json, other: Json) -> Json:
    """What the diff shows of ``obj``: its ``spec``, and ``metadata.finalizers`` when they change."""
    finalizers = (obj.get("metadata") or {}).get("finalizers")
    if finalizers != (other.get("metadata") or {}).get("finalizers"):
        return {"metadata": {"finalizers": finalizers}, "spec": obj.get("spec")}
    return {"spec": obj.get("spec")}


def _runtime_key(trainjob: Json) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of the runtime a TrainJob names; None: not a Trainer runtime."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    if (ref.get("apiGroup") or tc.GROUP) != tc.GROUP:
        return None
    kind = ref.get("kind") or tc.ClusterTrainingRuntimeKind
    namespace = (
        (trainjob.get("metadata") or {}).get("namespace", "") if kind == tc.TrainingRuntimeKind else ""
    )
    return str(kind), str(namespace), str(ref.get("name", ""))


def _key(obj: Json) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))


def plan(trainjobs: Iterable[Json], runtimes: Iterable[Json], now: str) -> list[Translation]:
    """Every object translated: the TrainJobs (from the runtimes as given), then the runtimes."""
    runtimes = list(runtimes)
    by_key = {_key(r): r for r in runtimes}
    out = []
    for trainjob in sorted(trainjobs, key=_key):
        key = _runtime_key(trainjob)
        out.append(translate_trainjob(trainjob, by_key.get(key) if key else None, now))
    out += [translate_runtime(r) for r in sorted(runtimes, key=_key)]
    return out


async def _crd(client: Client, name: str) -> Json | None:
    try:
        return await client.get(CRD_GVK, name)
    except NotFound:
        return None


def _spec_differences(want: Any, got: Any, path: str = "spec") -> str | None:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            found = _spec_differences(want.get(key), got.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            found = _spec_differences(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if want == got else path


async def migrate(client: Client, *, to: str, dry_run: bool, out: TextIO, now: str | None = None) -> int:
    """The subcommand against ``client``'s cluster; returns the exit code."""
    if to not in TARGETS:
        print(f"migrate: --to {to}: supported values: {', '.join(TARGETS)}", file=out)
        return 2
    crd = await _crd(client, TRAINJOB_CRD)
    form = crds.trainjob_crd_form(crd)
    if form in ("missing", "unknown"):
        print(f"migrate: no TrainJob CRD of a known level ({TRAINJOB_CRD}: {form})", file=out)
        return 1
    stamp = now or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    trainjobs = await client.list(TRAINJOB_GVK)
    runtimes = await client.list(TRAINING_RUNTIME_GVK) + await client.list(CLUSTER_TRAINING_RUNTIME_GVK)
    translations = plan(trainjobs, runtimes, stamp)
    changes = [t for t in translations if t.changed or t.refusals]
    refusals = [r for t in translations for r in t.refusals]
    for t in changes:
        if t.changed:
            out.write(diff(t))
        for note in t.notes:
            print(f"# {_where(t)}: {note}", file=out)
    if refusals:
        for r in refusals:
            print(f"migrate: refused: {r}", file=out)
        print(
            f"migrate: {len(refusals)} refusal(s) in {len({(r.kind, r.namespace, r.name) for r in refusals})} "
            "object(s): nothing was changed",
            file=out,
        )
        return 1
    to_write = [t for t in translations if t.changed]
    if not to_write:
        if form == "v2.3":
            print(
                "migrate: nothing to change (the installed TrainJob CRD is v2.3's: fields v2.3 removed "
                "are not visible through it; docs/migration.md)",
                file=out,
            )
        else:
            print("migrate: nothing to change", file=out)
        return 0
    counts = _counts(to_write)
    if dry_run:
        if form == "bridge":  # the server's own check too: it writes nothing either
            try:
                await _check_with_server(client, to_write)
            except MigrateError as err:
                print(f"migrate: refused: {err}; nothing was changed", file=out)
                return 1
        print(f"migrate: dry run: {counts} would change; nothing was written", file=out)
        if form != "bridge":
            print(f"migrate: before writing, install the bridge CRDs: {BRIDGE_APPLY}", file=out)
        return 0
    if form != "bridge":
        why = (
            "it prunes spec.runtimePatches"
            if form == "v2.1"
            else "it hides the v2.1 fields and keeps spec.trainer immutable"
        )
        print(
            f"migrate: refused: the installed TrainJob CRD is {form}'s ({why}): install the bridge CRDs "
            f"first: {BRIDGE_APPLY} (docs/migration.md); nothing was changed",
            file=out,
        )
        return 1
    for name in RUNTIME_CRDS:
        if crds.runtime_crd_defaults_torch_num_proc(await _crd(client, name)):
            print(
                f"migrate: refused: CRD {name} still defaults mlPolicy.torch.numProcPerNode (v2.1's): "
                f"{BRIDGE_APPLY}; nothing was changed",
                file=out,
            )
            return 1
    try:
        await _check_with_server(client, to_write)
    except MigrateError as err:
        print(f"migrate: refused: {err}; nothing was changed", file=out)
        return 1
    for written, t in enumerate(to_write):
        try:
            await client.update(t.after, field_owner=FIELD_MANAGER)
        except RequestError as err:
            print(
                f"migrate: writing {_where(t)} failed: {err}; {written} of {len(to_write)} written, "
                "run migrate again",
                file=out,
            )
            return 1
    print(f"migrate: wrote {counts}", file=out)
    return 0


async def _check_with_server(client: Client, to_write: list[Translation]) -> None:
    """Every update as the API server would store it (``dryRun=All``): refused ones, and ones the
    server would store otherwise than translated (a field pruned), stop the run before any write."""
    for t in to_write:
        try:
            stored = await client.update(t.after, field_owner=FIELD_MANAGER, dry_run=True)
        except RequestError as err:
            raise MigrateError(f"{_where(t)}: the API server refuses the update: {err}") from err
        where = _spec_differences(t.after.get("spec"), stored.get("spec"))
        if where is not None:
            raise MigrateError(f"{_where(t)}: the API server would not store {where} as translated")


def _counts(translations: list[Translation]) -> str:
    kinds: dict[str, int] = {}
    for t in translations:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    return ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in kinds.items())


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="trainer-controller-manager migrate",
        description="Rewrite a cluster's stored TrainJobs, TrainingRuntimes and "
        "ClusterTrainingRuntimes for the CRDs of another API level (docs/migration.md).",
    )
    parser.add_argument("--to", required=True, choices=TARGETS, help="the API level to migrate to")
    parser.add_argument("--dry-run", action="store_true", help="print the diffs and refusals; write nothing")
    parser.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, in-cluster)")
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace) -> int:
    try:
        rest = await get_config(args.kubeconfig or None)
    except RestConfigError as err:
        print(f"migrate: unable to get kubeconfig: {err}", file=sys.stdout)
        return 1
    async with Cluster(rest, field_owner=FIELD_MANAGER) as cluster:
        client = Client(cluster.transport, cluster.mapper, field_owner=FIELD_MANAGER)
        try:
            return await migrate(client, to=args.to, dry_run=args.dry_run, out=sys.stdout)
        except RequestError as err:
            print(f"migrate: {err}; nothing more was written", file=sys.stdout)
            return 1


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    return asyncio.run(_run(args))
