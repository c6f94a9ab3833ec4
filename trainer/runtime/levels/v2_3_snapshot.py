"""Level v2.3's runtime snapshot (Trainer v2.3.0; docs/behaviour/trainer.md §12.10).

Why: a TrainJob keeps the runtime it was first built from. On the first reconcile the runtime is
read as before and a copy of it is server-side applied as the ConfigMap
``<trainjob>-runtime-snapshot`` (data key ``runtime``: the runtime as YAML), controlled by the
TrainJob, so the garbage collector removes it with the TrainJob; every later reconcile builds
from that copy, so an edited or deleted runtime no longer reaches the TrainJob's JobSet. A
snapshot not controlled by this TrainJob, without the key, that does not decode or that names
another runtime fails the reconcile with upstream's words.

The YAML is what ``sigs.k8s.io/yaml.Marshal`` of the Go manager's typed runtime writes: the
runtime as the cache holds it (apiVersion, kind, the whole metadata), with the fields Go's
``json.Marshal`` writes even when empty (``trainer.api.gocodec``), keys sorted.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import yaml

from manager.client.errors import NotFound, RequestError
from manager.client.interfaces import Reader
from manager.meta.gotext import go_quote
from manager.meta.object import Json, json_copy, json_kind
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.objects import CONFIGMAP_GVK

__all__ = [
    "RUNTIME_DATA_KEY",
    "RUNTIME_SNAPSHOT_SUFFIX",
    "SNAPSHOT_FIRST",
    "SnapshotFirst",
    "decode_snapshot",
    "encode_runtime",
    "snapshot_configmap",
    "snapshot_name",
]

RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"
RUNTIME_DATA_KEY = "runtime"
_INVALID = "invalid runtime snapshot: "


def snapshot_name(trainjob: TrainJob) -> str:
    return ((trainjob.metadata.name if trainjob.metadata else None) or "") + RUNTIME_SNAPSHOT_SUFFIX


def _go_document(runtime: Json) -> Json:
    """``runtime`` as ``json.Marshal`` of the Go struct writes it (a copy; unknown fields kept)."""
    doc = json_copy(runtime)
    kind = doc.get("kind") or tc.TrainingRuntimeKind
    if (tc.API_VERSION, kind) in gocodec.ROOTS:
        try:
            gocodec.codec_for(tc.API_VERSION, kind).encode(doc)
            _encode_volume_claim_policies(doc)
        except (KeyError, TypeError, ValueError):
            doc = json_copy(runtime)  # an object the struct cannot hold: as it was read
    return doc


def _encode_volume_claim_policies(doc: Json) -> None:
    """JobSet v0.12.0's ``volumeClaimPolicies`` of the runtime's JobSet template, which v2.1.0's
    structs do not have, as v2.3.0's struct writes them (a PVC template's ``status: {}``)."""
    template = (doc.get("spec") or {}).get("template") or {}
    policies = (template.get("spec") or {}).get("volumeClaimPolicies")
    if not isinstance(policies, list):
        return
    for policy in policies:
        if isinstance(policy, dict):
            gocodec.encode_struct(policy, gocodec.VOLUME_CLAIM_POLICY, gocodec.JOBSET_V0_12_TYPES_FILE)


ENCODED_RUNTIMES = 64
"""How many runtimes (by content) keep their snapshot text (one per runtime version in use)."""


def encode_runtime(runtime: Json) -> str:
    """The snapshot's ``runtime`` value: the runtime's Go document as YAML, keys sorted.

    Encoded once per runtime content: every TrainJob of a runtime snapshots the same runtime, and
    again on each reconcile that runs before the cache holds its snapshot. Pure-Python YAML costs
    ~0.8 ms for the shipped torch-distributed runtime, a tenth of the manager's interpreter time
    in a running burst of 1,000 TrainJobs (docs/bench.md); the key, the runtime as JSON with its
    keys sorted, costs ~1 us."""
    try:
        key = orjson.dumps(runtime, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON-shaped (no cached runtime is): encoded as it is
        return _encode(runtime)
    return _encode_json(key)


@functools.lru_cache(maxsize=ENCODED_RUNTIMES)
def _encode_json(key: bytes) -> str:
    runtime: Json = orjson.loads(key)
    return _encode(runtime)


def _encode(runtime: Json) -> str:
    text: str = yaml.safe_dump(
        _go_document(runtime), sort_keys=True, default_flow_style=False, allow_unicode=True, width=1 << 30
    )
    return text


def snapshot_configmap(trainjob: TrainJob, runtime: Json) -> Json:
    """The apply configuration of the snapshot of ``runtime`` for ``trainjob``."""
    meta = trainjob.metadata
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(trainjob),
            "namespace": (meta.namespace if meta else None) or "",
            "ownerReferences": [
                {
                    "apiVersion": tc.API_VERSION,
                    "kind": tc.TrainJobKind,
                    "name": (meta.name if meta else None) or "",
                    "uid": (meta.uid if meta else None) or "",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {RUNTIME_DATA_KEY: encode_runtime(runtime)},
    }


PARSED_SNAPSHOTS = 512
"""How many snapshot texts keep their parsed document (one per runtime version in use, usually)."""


def _yaml_error(err: yaml.YAMLError) -> str:
    """PyYAML's complaint in the words of ``sigs.k8s.io/yaml`` (line numbers 1-based)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    line = f"line {mark.line + 1}: " if mark is not None else ""
    return f"error converting YAML to JSON: yaml: {line}{problem}"


def decode_snapshot(trainjob: TrainJob, configmap: Json) -> Json:
    """The runtime document of a snapshot ConfigMap, checked as upstream's ``getRuntimeSnapshot``
    checks it; RuntimeFailure with its words otherwise (without the caller's prefix)."""
    uid = (trainjob.metadata.uid if trainjob.metadata else None) or ""
    owner = next(
        (
            ref
            for ref in (configmap.get("metadata") or {}).get("ownerReferences") or []
            if ref.get("controller")
        ),
        None,
    )
    if owner is None or owner.get("uid") != uid:
        raise RuntimeFailure(_INVALID + "a snapshot configmap exists but is owned by another object")
    data = configmap.get("data") or {}
    if RUNTIME_DATA_KEY not in data:
        raise RuntimeFailure(_INVALID + f'snapshot ConfigMap missing "{RUNTIME_DATA_KEY}" data key')
    doc, error = _parse_snapshot(str(data[RUNTIME_DATA_KEY]))
    if error is not None:
        raise RuntimeFailure(_INVALID + error)
    assert doc is not None
    _check_ref(trainjob, doc)
    return json_copy(doc)  # the parsed document stays as parsed for the next TrainJob


@functools.lru_cache(maxsize=PARSED_SNAPSHOTS)
def _parse_snapshot(text: str) -> tuple[Json | None, str | None]:
    """The runtime document of a snapshot's text, checked as upstream decodes it into the typed
    runtime, or the reason it does not decode (``unable to unmarshal the snapshot: ...``).

    Parsed once per text: every reconcile of a TrainJob reads its snapshot, and Kueue in front
    reconciles each one many times (its writes, the Workload's); pure-Python YAML was a fifth of
    the manager's CPU in the Kueue burst (docs/bench.md). The TrainJobs of one runtime version share
    one text; each gets a copy of its document (an orjson round trip, a small fraction of the
    parse), so nothing one build does reaches another."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        return None, "unable to unmarshal the snapshot: " + _yaml_error(err)
    if doc is None:
        doc = {}
    kind_text = doc.get("kind") if isinstance(doc, dict) else None
    codec = gocodec.codec_for(
        tc.API_VERSION, kind_text if kind_text == tc.ClusterTrainingRuntimeKind else tc.TrainingRuntimeKind
    )
    try:
        if not isinstance(doc, dict):
            raise gocodec.GoDecodeError(
                f"json: cannot unmarshal {json_kind(doc)} into Go value of type v1alpha1.{codec.kind}"
            )
        check = dict(doc)
        check.pop("apiVersion", None)
        check.pop("kind", None)
        codec.check(check)
    except gocodec.GoDecodeError as err:
        return None, f"unable to unmarshal the snapshot: error unmarshaling JSON: while decoding JSON: {err}"
    return doc, None


def _check_ref(trainjob: TrainJob, doc: Json) -> None:
    ref = trainjob.spec.runtime_ref if trainjob.spec else None
    want_name = ref.name if ref else ""
    want_group = ref.api_group if ref else None
    want_kind = ref.kind if ref else None
    api_version = str(doc.get("apiVersion") or "")
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    kind = str(doc.get("kind") or "")
    name = str((doc.get("metadata") or {}).get("name") or "")
    if (want_kind and kind != want_kind) or (want_group and group != want_group) or name != want_name:
        raise RuntimeFailure(
            _INVALID + "the snapshot refers to the wrong runtime: expecting a runtime with name, api group "
            "and kind of "
            f"{go_quote(want_name)}, {go_quote(want_group or '<any>')}, {go_quote(want_kind or '<any>')} but "
            f"found runtime with name, api group and kind of {go_quote(name)}, {go_quote(group)}, {go_quote(kind)}"
        )


class SnapshotFirst:
    """``RuntimeSource`` of v2.3: the TrainJob's snapshot, else the live runtime, snapshotted
    (through ``client``; without one -- runtimes built only to be looked at -- nothing is
    written)."""

    async def obtain(
        self,
        client: Any,
        reader: Reader,
        trainjob: TrainJob,
        live: Callable[[], Awaitable[Json]],
        snapshot_error: str,
    ) -> Json:
        namespace = (trainjob.metadata.namespace if trainjob.metadata else None) or ""
        try:
            configmap = await reader.get(CONFIGMAP_GVK, snapshot_name(trainjob), namespace)
        except NotFound:
            runtime = await live()
            if client is None:  # runtimes that build without writing (the webhooks' never build)
                return runtime
            snapshot = snapshot_configmap(trainjob, runtime)
            try:
                await client.apply(snapshot, field_owner=tc.FieldManager, force=True)
            except RequestError as err:
                raise RuntimeFailure(
                    f"creating runtime snapshot: applying runtime snapshot ConfigMap: {err}"
                ) from err
            # Built from what the snapshot holds, not from the live JSON: upstream's typed
            # runtime is the same struct either way, and so must ours be. The live JSON lacks
            # what the Go struct writes (a volumeClaimPolicies template's `status: {}`), so the
            # next reconcile's JobSet, built from the snapshot, differed, and the API server
            # refused it ("spec.volumeClaimPolicies: Invalid value: Value is immutable").
            return decode_snapshot(trainjob, snapshot)
        except RequestError as err:
            raise RuntimeFailure(f"{snapshot_error}: {err}") from err
        try:
            return decode_snapshot(trainjob, configmap)
        except RuntimeFailure as failure:
            raise RuntimeFailure(f"{snapshot_error}: {failure.message}") from failure


SNAPSHOT_FIRST = SnapshotFirst()
