"""Apply each manifest file to both sides, let both settle, compare what came out.

A manifest file is plain Kubernetes YAML (any number of documents); namespaced objects go to a
fresh namespace, the same name on both sides. Two extra document kinds (apiVersion
``conformance.trainer.kubeflow.org/v1alpha1``) let a scenario do more than create:

``Step``            ``settle: true`` (settle, snapshot: Job pods still Running are waited for),
                    ``settle: running`` (the same, but Running pods may stay Running: a state
                    while a Job runs, with pods that run long, see ``kwokstages``),
                    ``patch: {apiVersion, kind, name, patch, type: merge|json|strategic}``,
                    ``update: {apiVersion, kind, name, merge}`` (read the object, apply the JSON
                    merge patch ``merge`` to it, PUT it whole: an update, retried on conflict),
                    ``delete: {apiVersion, kind, name}``, ``sleep: SECONDS``,
                    ``wait: {apiVersion, kind, name, condition, timeout}`` (until the object,
                    namespaced or cluster-scoped, has condition ``condition`` True: a queue that
                    must be active before what is queued in it); documents after a
                    step are applied after it, so a file is a sequence of steps: create, settle,
                    change, settle, change, ..., each answer and each settled state compared.
``WebhookRequest``  an AdmissionReview POSTed straight to both sides' webhook servers (direct
                    mode): ``path``, ``operation``, ``requestKind: {group, version, kind}``,
                    ``resource: {group, version, resource}``, ``object``, optional ``oldObject``,
                    ``name``. For inputs the API server would refuse before admission.
``StatusRequest``   a POST to both sides' TrainJob status servers (direct mode; only with the
                    run's ``--feature-gates TrainJobStatus=true``): ``name``, ``trainJob`` (the
                    URL's), ``token`` (``{pod: <trainjob>, audience: <trainjob>}``: a TokenRequest
                    bound to that TrainJob's first pod, the default both the request's TrainJob;
                    ``{serviceAccount: <name>, namespace: other, audience: ...}``: an unbound one,
                    ``other`` a second namespace of the scenario; ``{raw: <text>}``; ``none``),
                    ``body`` (JSON) or ``rawBody`` (text), optional ``padTo`` (spaces appended up
                    to that many bytes), ``path``, ``scheme`` (default ``Bearer``).

Compared: the answer to every create/patch/update/delete (allowed, HTTP code, message), every
WebhookRequest's answer (allowed, code, message, warnings and the object after its patch), and
after each settle the objects listed in ``normalize.COLLECTED`` plus the managers' events.

A scenario file belongs to API levels (``scenario_levels``): those its header names
(``# levels: v2.1 v2.3``), else the level its folder is named after (``scenarios/v2.3/``),
else every level.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime
import hashlib
import json
import re
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yaml

from manager.envtest.kwokstages import pod_run_seconds
from manager.longrun import Progress
from trainer import levels
from trainer.conformance.diff import Difference, compare
from trainer.conformance.harness import Side
from trainer.conformance.normalize import COLLECTED, NAMED_FIRST, Normaliser

CONFORMANCE_API = "conformance.trainer.kubeflow.org/v1alpha1"
STEP_FIELDS = ("settle", "sleep", "wait", "patch", "update", "delete")
WAIT_SECONDS = 60.0
"""The bound of a ``wait`` step without its own ``timeout``."""
T = TypeVar("T")
LEVELS_HEADER = re.compile(r"^#\s*levels:\s*(?P<levels>.+?)\s*$")
UPDATE_ATTEMPTS = 5
PENDING_GRACE_SECONDS = 15.0
"""A settle waiting for Running pods is bounded by their due completion plus the quiet time and
this (KWOK's own lag), when that is later than ``max_seconds``."""


@dataclass
class Settings:
    quiet_seconds: float = 4.0  # settled: no change in the compared objects for this long
    max_seconds: float = 90.0  # bound on one settle
    poll_seconds: float = 1.0
    kueue: bool = False
    """Kueue runs in front of both sides (``--kueue``): what its timing decides is normalised
    away (``Normaliser.kueue``)."""


@dataclass
class Outcome:
    """What one side produced for one scenario: keyed, normalised records."""

    records: dict[str, Any] = field(default_factory=dict)
    unsettled: list[str] = field(default_factory=list)


@dataclass
class ScenarioResult:
    name: str
    differences: list[Difference]
    objects: int
    answers: int
    unsettled: list[str]
    ours: dict[str, Any] = field(default_factory=dict)
    theirs: dict[str, Any] = field(default_factory=dict)


def load_scenario(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return [d for d in docs if not str(d.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")]


def scenario_levels(path: Path) -> frozenset[str] | None:
    """The API levels a scenario file belongs to: its ``# levels: v2.1 v2.3`` header (a comment
    line before the first document, names split by spaces or commas), else the level its folder
    is named after (``scenarios/v2.3/x.yaml``), else None (every level)."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        if m := LEVELS_HEADER.match(line):
            names = frozenset(n for n in re.split(r"[\s,]+", m["levels"]) if n)
            unknown = sorted(names - set(levels.LEVELS))
            if unknown:
                raise ValueError(f"{path}: unknown API level(s) {', '.join(unknown)} in its levels header")
            return names
    if path.parent.name in levels.LEVELS:
        return frozenset({path.parent.name})
    return None


def scenario_files(paths: list[Path], level: str | None = None) -> list[Path]:
    """The manifest files under ``paths``; with ``level``, only those that belong to it."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        else:
            files.append(path)
    if level is None:
        return files
    return [f for f in files if (belongs := scenario_levels(f)) is None or level in belongs]


def namespace_for(path: Path, run_id: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")[:40].strip("-")
    return f"c-{slug}-{run_id}"


RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
RUNTIME_WAIT_SECONDS = 15.0
POD_WAIT_SECONDS = 60.0
"""How long a ``StatusRequest`` waits for the pod its token is bound to."""
# the end of both runtime-lookup denials (registry's TrainingRuntime and ClusterTrainingRuntime)
_RUNTIME_MISSING = "must be created before the TrainJob is created"


def _runtime_of(trainjob: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of the runtime a TrainJob names; kind defaults as the API does."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    return ref.get("kind") or "ClusterTrainingRuntime", ref.get("name") or ""


def _answer(code: int, body: Any) -> dict[str, Any]:
    """What a user sees of an API answer: allowed or not, the HTTP code, the message."""
    allowed = code < 400
    message = ""
    if not allowed and isinstance(body, dict):
        message = body.get("message", "")
    elif not allowed:
        message = str(body)
    return {"allowed": allowed, "code": code, "message": message}


def _apply_json_patch(obj: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/remove/replace (what admission webhooks answer) applied to a copy."""
    doc = copy.deepcopy(obj)

    def parts(pointer: str) -> list[str]:
        return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]

    for op in ops:
        segs = parts(op["path"])
        if not segs:
            doc = copy.deepcopy(op.get("value"))
            continue
        parent = doc
        for seg in segs[:-1]:
            parent = parent[int(seg)] if isinstance(parent, list) else parent[seg]
        last = segs[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                parent.pop(index)
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
        elif kind in ("add", "replace"):
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            parent.pop(last, None)
    return doc


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: ``patch`` applied to a copy of ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _epoch(stamp: str) -> float | None:
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def orphans_due(listed: dict[str, list[dict[str, Any]]]) -> int:
    """How many of the listed objects (per kind, one namespace) name an owner of a listed kind
    that is no longer there: the garbage collector deletes them (or drops the reference) soon,
    so a snapshot holding them is not a settled state. Owners of kinds not listed (a Node, a
    cluster-scoped runtime) are not judged."""
    uids = {
        str(meta.get("uid")) for items in listed.values() for meta in (o.get("metadata") or {} for o in items)
    }
    count = 0
    for items in listed.values():
        for obj in items:
            refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
            if any(ref.get("kind") in listed and str(ref.get("uid")) not in uids for ref in refs):
                count += 1
    return count


def running_pods_due(side: Side, pods: list[dict[str, Any]]) -> list[float]:
    """When (``time.time()``) each Running, not deleting, Job-owned pod of ``pods`` is due to
    succeed: its ``status.startTime`` plus its run time (``kwokstages.pod_run_seconds``: its
    annotation, else the side's). Empty for a side whose pods the harness does not time."""
    timing = side.pod_timing
    if timing is None or timing.run_seconds is None:
        return []
    due = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if status.get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        if not any(ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or ()):
            continue
        started = _epoch(str(status.get("startTime") or ""))
        if started is None:
            started = time.time()
        due.append(started + pod_run_seconds(pod, timing.run_seconds))
    return due


def _describe_doc(i: int, doc: dict[str, Any]) -> str:
    """How a step names a document of the file: its index and what it does."""
    kind = doc.get("kind")
    if doc.get("apiVersion") == CONFORMANCE_API and kind == "Step":
        what = [k for k in STEP_FIELDS if k in doc]
        return f"document {i}: Step {'+'.join(what) or '(empty)'}"
    if doc.get("apiVersion") == CONFORMANCE_API and kind == "WebhookRequest":
        return f"document {i}: WebhookRequest {doc.get('name') or doc.get('path')}"
    if doc.get("apiVersion") == CONFORMANCE_API and kind == "StatusRequest":
        return f"document {i}: StatusRequest {doc.get('name') or doc.get('trainJob')}"
    meta = doc.get("metadata") or {}
    return f"document {i}: create {kind}/{meta.get('name') or meta.get('generateName', '')}"


class Scenario:
    def __init__(
        self, path: Path, namespace: str, settings: Settings, progress: Progress | None = None
    ) -> None:
        self.path = path
        self.name = path.stem
        self.namespace = namespace
        self.extra_namespaces: set[str] = set()
        self.settings = settings
        self.docs = load_scenario(path)
        self.progress = progress

    def step(self, side: Side, what: str) -> contextlib.AbstractContextManager[None]:
        """The step ``what`` on ``side``, for the error and interruption lines of the command."""
        if self.progress is None:
            return contextlib.nullcontext()
        return self.progress.step(f"{what} ({side.name})")

    async def run(self, side: Side) -> Outcome:
        out = Outcome()
        with self.step(side, "list nodes"):
            nodes = await side.kube.list("v1", "Node", None) or []
        norm = Normaliser(self.namespace, [n["metadata"]["name"] for n in nodes], kueue=self.settings.kueue)
        with self.step(side, f"create namespace {self.namespace}"):
            code, body = await side.kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}, None
            )
            if code >= 300:
                raise RuntimeError(
                    f"{side.name}: creating namespace {self.namespace} answered {code}: {body}"
                )
        snapshot = 0
        runtimes: set[tuple[str, str]] = set()  # the runtimes this scenario has created
        for i, doc in enumerate(self.docs):
            with self.step(side, _describe_doc(i, doc)):
                snapshot = await self._document(side, norm, out, i, doc, snapshot, runtimes)
        with self.step(side, "settle final"):
            await self._settle(side, norm, out, "final")
        for key, value in list(out.records.items()):
            out.records[key] = norm.strings(value)
        return out

    async def _document(
        self,
        side: Side,
        norm: Normaliser,
        out: Outcome,
        i: int,
        doc: dict[str, Any],
        snapshot: int,
        runtimes: set[tuple[str, str]],
    ) -> int:
        """Apply document ``i`` on ``side``; returns the number of settle snapshots taken so far."""
        kind = doc.get("kind")
        if doc.get("apiVersion") == CONFORMANCE_API and kind == "Step":
            if settle := doc.get("settle"):
                snapshot += 1
                await self._settle(side, norm, out, f"settle-{snapshot}", running=settle == "running")
            if "sleep" in doc:
                await asyncio.sleep(float(doc["sleep"]))
            if (wait := doc.get("wait")) and not await self._wait_condition(side, wait):
                out.records[f"wait/{i}/{wait['kind']}/{wait['name']}"] = {
                    "timedOut": f"{wait.get('condition', 'Ready')} never True"
                }
            if patch := doc.get("patch"):
                code, body = await side.kube.patch(
                    patch["apiVersion"],
                    patch["kind"],
                    patch["name"],
                    self.namespace,
                    patch["patch"],
                    patch.get("type", "merge"),
                )
                out.records[f"answer/{i}/patch {patch['kind']}/{patch['name']}"] = _answer(code, body)
            if update := doc.get("update"):
                code, body = await self._update(side, update)
                out.records[f"answer/{i}/update {update['kind']}/{update['name']}"] = _answer(code, body)
            if delete := doc.get("delete"):
                code, body = await side.kube.delete(
                    delete["apiVersion"], delete["kind"], delete["name"], self.namespace
                )
                out.records[f"answer/{i}/delete {delete['kind']}/{delete['name']}"] = _answer(code, body)
        elif doc.get("apiVersion") == CONFORMANCE_API and kind == "WebhookRequest":
            key = f"webhook/{i}/{doc.get('name') or doc['path']}"
            out.records[key] = await self._webhook(side, doc, norm)
        elif doc.get("apiVersion") == CONFORMANCE_API and kind == "StatusRequest":
            key = f"status/{i}/{doc.get('name') or doc['trainJob']}"
            out.records[key] = await self._status_request(side, doc)
        else:
            obj = copy.deepcopy(doc)
            meta = obj.setdefault("metadata", {})
            resource = await side.kube.resource(obj.get("apiVersion", ""), kind or "")
            namespaced = resource[1] if resource else True
            if namespaced:
                meta["namespace"] = self.namespace
            if kind == "TrainJob" and _runtime_of(obj) in runtimes:
                await self._await_runtime_admitted(side, obj)
            code, body = await side.kube.create(obj, self.namespace if namespaced else None)
            name = meta.get("name") or meta.get("generateName", "")
            out.records[f"answer/{i}/create {kind}/{name}"] = _answer(code, body)
            if kind in RUNTIME_KINDS and code < 300:
                runtimes.add((kind, name))
        return snapshot

    async def _update(self, side: Side, update: dict[str, Any]) -> tuple[int, Any]:
        """Read the object, apply the merge patch ``update['merge']`` to it, PUT it whole; a
        conflict (a controller wrote it in between) reads it again, up to ``UPDATE_ATTEMPTS``."""
        resource = await side.kube.resource(update["apiVersion"], update["kind"])
        namespace = self.namespace if (resource[1] if resource else True) else None
        code: int = 0
        body: Any = None
        for _ in range(UPDATE_ATTEMPTS):
            code, body = await side.kube.get(update["apiVersion"], update["kind"], update["name"], namespace)
            if code >= 300:
                return code, body
            code, body = await side.kube.replace(merge_patch(body, update.get("merge") or {}), namespace)
            if code != 409:
                break
        return code, body

    async def _wait_condition(self, side: Side, wait: dict[str, Any]) -> bool:
        """Poll the object ``wait`` names until its condition ``wait['condition']`` is True (within
        ``wait['timeout']`` seconds, default ``WAIT_SECONDS``); False when it never was."""
        resource = await side.kube.resource(wait["apiVersion"], wait["kind"])
        namespace = self.namespace if (resource[1] if resource else True) else None
        deadline = time.monotonic() + float(wait.get("timeout", WAIT_SECONDS))
        wanted = wait.get("condition", "Ready")
        while True:
            code, body = await side.kube.get(wait["apiVersion"], wait["kind"], wait["name"], namespace)
            if code == 200 and any(
                c.get("type") == wanted and c.get("status") == "True"
                for c in (body.get("status") or {}).get("conditions") or []
            ):
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)

    async def _await_runtime_admitted(self, side: Side, trainjob: dict[str, Any]) -> None:
        """Hold a TrainJob back until this side's webhook finds the runtime it names.

        The scenario has just created that runtime. The Go manager's webhook reads runtimes from
        its informer cache, which may not have seen it yet; it then denies the TrainJob with
        "must be created before the TrainJob is created". Ours confirms a miss live
        (docs/divergences.md T-3). The comparison is of what the managers make, not of that
        race, so both sides wait (a dry-run create, at most ``RUNTIME_WAIT_SECONDS``)."""
        path = await side.kube.collection_path(trainjob["apiVersion"], "TrainJob", self.namespace)
        deadline = time.monotonic() + RUNTIME_WAIT_SECONDS
        while time.monotonic() < deadline:
            code, body = await side.kube.request("POST", f"{path}?dryRun=All", trainjob)
            if code < 300 or _RUNTIME_MISSING not in _answer(code, body)["message"]:
                return
            await asyncio.sleep(0.2)

    async def cleanup(self, side: Side) -> None:
        await side.kube.request("DELETE", f"/api/v1/namespaces/{self.namespace}")
        for extra in sorted(self.extra_namespaces):  # a StatusRequest's second namespace
            await side.kube.request("DELETE", f"/api/v1/namespaces/{extra}")
        # Cluster-scoped objects a scenario made are removed too.
        for doc in self.docs:
            if doc.get("apiVersion") == CONFORMANCE_API or "metadata" not in doc:
                continue
            resource = await side.kube.resource(doc["apiVersion"], doc["kind"])
            if resource and not resource[1]:
                await side.kube.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], None)

    async def _collect(self, side: Side, norm: Normaliser) -> tuple[dict[str, Any], list[float], int]:
        """The normalised snapshot, when (``time.time()``) each Job pod still Running on a local
        cluster of the harness is due to succeed (``running_pods_due``), and how many collected
        objects wait for the garbage collector (``orphans_due``; 0 without one)."""
        snapshot: dict[str, Any] = {}
        events: list[dict[str, Any]] = []
        due: list[float] = []
        listed: dict[str, list[dict[str, Any]]] = {}
        # Pods and Kueue's Workloads first: their generated names are learned for what mentions them.
        ordered = sorted(COLLECTED, key=lambda ak: ak[1] not in NAMED_FIRST)
        for api_version, kind in ordered:
            items = await side.kube.list(api_version, kind, self.namespace)
            if items is None:
                continue
            if kind == "Event":
                events = items
                continue
            if kind == "Pod":
                due = running_pods_due(side, items)
            listed.setdefault(kind, []).extend(items)
            group = api_version.split("/")[0] if "/" in api_version else ""
            label = f"{kind}.{group}" if kind == "PodGroup" else kind
            snapshot.update(norm.objects(label, items))
        snapshot.update(norm.events(events))
        return snapshot, due, orphans_due(listed) if side.collects_garbage else 0

    async def _settle(
        self, side: Side, norm: Normaliser, out: Outcome, label: str, *, running: bool = False
    ) -> None:
        """Poll until the normalised snapshot stays unchanged for quiet_seconds (bounded by
        max_seconds) with no collected object waiting for the garbage collector (its owner, of a
        collected kind, gone: a state the cluster leaves by itself, however loaded the garbage
        collector). Unless ``running``, a Job pod still Running on a local cluster is waited
        for too: KWOK will complete it (``running_pods_due``), however long it runs, so the
        state is not taken as settled in between; the bound then covers its due time."""
        started = time.monotonic()
        last_digest, stable_since = "", time.monotonic()
        snapshot: dict[str, Any] = {}
        while True:
            snapshot, due, orphans = await self._collect(side, norm)
            digest = hashlib.sha256(json.dumps(snapshot, sort_keys=True).encode()).hexdigest()
            now = time.monotonic()
            pending = [] if running else due
            if digest != last_digest:
                last_digest, stable_since = digest, now
            elif now - stable_since >= self.settings.quiet_seconds and not pending and not orphans:
                break
            bound = started + self.settings.max_seconds
            if pending:
                latest = now + (max(pending) - time.time())
                bound = max(bound, latest + self.settings.quiet_seconds + PENDING_GRACE_SECONDS)
            if now > bound:
                out.unsettled.append(label)
                break
            await asyncio.sleep(self.settings.poll_seconds)
        for key, obj in snapshot.items():
            out.records[f"{label}/{key}"] = obj

    def _audience(self, trainjob: str) -> str:
        return f"trainer.kubeflow.org/v1alpha1/namespaces/{self.namespace}/trainjobs/{trainjob}/status"

    async def _token(self, side: Side, spec: Any, trainjob: str) -> str | None:
        """The bearer token a ``StatusRequest`` sends (None: no Authorization header)."""
        if spec == "none":
            return None
        spec = spec if isinstance(spec, dict) else {}
        if "raw" in spec:
            return str(spec["raw"])
        audience = self._audience(str(spec.get("audience") or trainjob))
        token_request: dict[str, Any] = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [audience], "expirationSeconds": 3600},
        }
        if "serviceAccount" in spec:
            namespace = self.namespace
            if spec.get("namespace") == "other":
                namespace = f"{self.namespace}-other"
                await side.kube.request(
                    "POST",
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
                self.extra_namespaces.add(namespace)
            account = str(spec["serviceAccount"])
        else:
            namespace, pod = self.namespace, await self._first_pod(side, str(spec.get("pod") or trainjob))
            account = pod["spec"].get("serviceAccountName") or "default"
            token_request["spec"]["boundObjectRef"] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            }
        await side.kube.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
        )
        code, body = await side.kube.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", token_request
        )
        if code != 201:
            raise RuntimeError(f"TokenRequest for {namespace}/{account} answered {code}: {body}")
        return str(body["status"]["token"])

    async def _first_pod(self, side: Side, trainjob: str) -> dict[str, Any]:
        """The TrainJob's pod first by name (its JobSet's), waited for up to ``POD_WAIT_SECONDS``."""
        deadline = time.monotonic() + POD_WAIT_SECONDS
        while True:
            pods = [
                p
                for p in await side.kube.list("v1", "Pod", self.namespace) or []
                if (p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == trainjob
            ]
            if pods:
                return min(pods, key=lambda p: str(p["metadata"]["name"]))
            if time.monotonic() > deadline:
                raise RuntimeError(f"no pod of TrainJob {trainjob} after {POD_WAIT_SECONDS:.0f}s")
            await asyncio.sleep(0.5)

    async def _status_request(self, side: Side, doc: dict[str, Any]) -> dict[str, Any]:
        """POST one status update to the side's status server: the HTTP code and the JSON answer."""
        if side.status_port is None:
            return {"error": "no status server (run with --feature-gates TrainJobStatus=true)"}
        trainjob = str(doc["trainJob"])
        token = await self._token(side, doc.get("token"), trainjob)
        raw_body = doc.get("rawBody")
        data = str(raw_body).encode() if raw_body is not None else json.dumps(doc.get("body", {})).encode()
        if pad := doc.get("padTo"):
            data += b" " * max(0, int(pad) - len(data))
        path = (
            doc.get("path")
            or f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{self.namespace}/trainjobs/{trainjob}/status"
        )
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"{doc.get('scheme', 'Bearer')} {token}"
        connector = aiohttp.TCPConnector(ssl=side.webhook_ssl())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(
                f"https://127.0.0.1:{side.status_port}{path}",
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as response,
        ):
            raw = await response.read()
            record: dict[str, Any] = {"http": response.status, "contentType": response.content_type}
        try:
            record["body"] = json.loads(raw)
        except ValueError:
            record["body"] = raw.decode(errors="replace")
        record["newline"] = raw.endswith(b"\n")
        return record

    async def _webhook(self, side: Side, doc: dict[str, Any], norm: Normaliser) -> dict[str, Any]:
        url = side.routes.get(doc["path"])
        if url is None:
            return {
                "error": f"no webhook server known for {doc['path']} (give --webhook-{side.name} PATH=URL)"
            }
        obj = copy.deepcopy(doc.get("object"))
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"]["namespace"] = self.namespace
        request = {
            "uid": str(uuid.uuid4()),
            "kind": doc["requestKind"],
            "resource": doc["resource"],
            "requestKind": doc["requestKind"],
            "requestResource": doc["resource"],
            "name": doc.get("name", ""),
            "namespace": self.namespace,
            "operation": doc.get("operation", "CREATE"),
            "userInfo": {"username": "conformance", "groups": ["system:masters"]},
            "object": obj,
            "oldObject": doc.get("oldObject"),
            "dryRun": False,
            "options": None,
        }
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        connector = aiohttp.TCPConnector(ssl=side.webhook_ssl())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(url, json=review, timeout=aiohttp.ClientTimeout(total=30)) as response,
        ):
            text = await response.text()
            http_code = response.status
        try:
            answer = json.loads(text).get("response") or {}
        except (json.JSONDecodeError, AttributeError):
            return {"http": http_code, "body": text}
        result = answer.get("status") or {}  # AdmissionResponse.Result is "status" in JSON
        record: dict[str, Any] = {
            "http": http_code,
            "allowed": answer.get("allowed"),
            # The API server ignores the result of an allowed answer (Go sends code 200 there).
            "code": None if answer.get("allowed") else result.get("code"),
            "message": result.get("message", ""),
            # What the API server passes on to the user besides code and message (it fills in
            # status: Failure itself; an empty metadata is serialisation noise).
            "reason": result.get("reason", ""),
            "details": result.get("details"),
            "warnings": answer.get("warnings") or [],
            "uidEchoed": answer.get("uid") == request["uid"],
        }
        if answer.get("patch"):
            ops = json.loads(base64.b64decode(answer["patch"]))
            try:
                record["patched"] = _apply_json_patch(obj, ops)
            except (KeyError, IndexError, ValueError, TypeError) as err:
                record["patched"] = f"<patch does not apply: {err}>"
        return record


async def both(first: Coroutine[Any, Any, T], second: Coroutine[Any, Any, T]) -> tuple[T, T]:
    """Run both coroutines; the first to fail cancels the other (awaited) and is raised as it is.

    ``asyncio.gather`` would leave the other side running on, unobserved, while its cluster is
    torn down (its failure then reported nowhere, or as a stray task error at exit)."""
    tasks = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
    done: set[asyncio.Future[T]] = set()
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:  # also when this coroutine is cancelled (a stop signal): nothing keeps running
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in sorted(tasks, key=lambda t: t not in done):  # the one that failed first
        if not task.cancelled() and (err := task.exception()) is not None:
            raise err
    return tasks[0].result(), tasks[1].result()


async def run_scenario(
    path: Path,
    ours: Side,
    theirs: Side,
    run_id: str,
    settings: Settings,
    *,
    keep: bool = False,
    progress: Progress | None = None,
) -> ScenarioResult:
    scenario = Scenario(path, namespace_for(path, run_id), settings, progress)
    try:
        a, b = await both(scenario.run(ours), scenario.run(theirs))
    finally:
        if not keep:
            with progress.step("cleanup") if progress else contextlib.nullcontext():
                await asyncio.gather(scenario.cleanup(ours), scenario.cleanup(theirs), return_exceptions=True)
    diffs = compare(scenario.name, a.records, b.records)
    keys = set(a.records) | set(b.records)
    answers = sum(1 for k in keys if k.startswith(("answer/", "webhook/", "status/")))
    unsettled = [f"ours:{u}" for u in a.unsettled] + [f"theirs:{u}" for u in b.unsettled]
    return ScenarioResult(scenario.name, diffs, len(keys) - answers, answers, unsettled, a.records, b.records)
