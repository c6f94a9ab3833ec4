"""What the controllers made, reduced to what must be equal on both sides.

Volatile values are replaced by placeholders: uids, timestamps, resourceVersions, managedFields,
generated name suffixes, cluster IPs, node assignments, random key material; the namespace (the
same name on both sides) reads ``<ns>``. Each object is keyed ``Kind/name`` (pods by their
normalised name, ``#n`` when several share one).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Any

import yaml

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
GENERATED = re.compile(r"^(?P<base>.+)-[bcdfghjklmnpqrstvwxz2456789]{5}$")
IPV4 = re.compile(r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$")
WORKLOAD_NAME = re.compile(r"^(?P<base>.+)-[0-9a-f]{5}$")
"""Kueue's Workload names: ``<kind>-<owner>-`` and 5 hex digits of a hash over the owner's uid."""
KUEUE_CACHE_RACE = re.compile(
    r'admission webhook "m(?:jobset|job)\.kb\.io" denied the request: '
    r'(?:TrainJob\.trainer\.kubeflow\.org|JobSet\.jobset\.x-k8s\.io) "[^"]+" not found'
)
"""Kueue's JobSet and Job webhooks (v0.15, v0.17) look the object's owner up in their informer
cache (``FindAncestorJobManagedByKueue``) and refuse the create while the owner (a TrainJob, a
JobSet) is not there yet: a manager's ``TrainJobResourcesCreationFailed`` or a JobSet
controller's ``JobCreationFailed`` (jobset v0.12.0, and level v2.3) Warning, then a retry."""
KUEUE_CACHE_RACE_REASONS = ("TrainJobResourcesCreationFailed", "JobCreationFailed")
KUEUE_WAIT = re.compile(r"(wait time since (?:queued|reservation) was )\d+s")
"""The seconds in Kueue's ``QuotaReserved`` and ``Admitted`` event messages."""

#: (apiVersion, kind) collected in each scenario namespace.
COLLECTED: tuple[tuple[str, str], ...] = (
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("batch/v1", "Job"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),  # JobSet v0.12.0's volumeClaimPolicies
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"),
    ("kueue.x-k8s.io/v1beta2", "Workload"),  # with Kueue in front of both sides (``--kueue``)
    ("v1", "Event"),
)
NAMED_FIRST = ("Pod", "Workload")
"""Kinds collected before the others: the names generated for them are learned (``renames``) so
that every object and event naming one reads the same on both sides."""

METADATA_DROP = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionGracePeriodSeconds",
}
#: Components whose events are the control plane's, not the managers' under comparison.
KUBE_COMPONENTS = {
    "job-controller",
    "default-scheduler",
    "scheduler-plugins-scheduler",
    "volcano",
    "kubelet",
    "kwok",
    "endpoint-controller",
    "endpoint-slice-controller",
    "endpointslice-controller",
    "taint-eviction-controller",
    "ttl-after-finished-controller",
    "garbage-collector-controller",
    "namespace-controller",
}
RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"
"""Trainer v2.3.0's runtime snapshot ConfigMaps: their ``runtime`` data key is a YAML document."""
KEY_MATERIAL = re.compile(r"ssh|rsa|ecdsa|ed25519|authorized_keys|private|tls\.key|tls\.crt|ca\.crt")
CURVE_CERT = "curve.cert"
"""Trainer v2.3.0's Flux CURVE certificate: its keys derive from the TrainJob's uid, the rest is fixed."""
CURVE_KEYS = re.compile(r'^(    (?:public|secret)-key = ")[^"]*(")$', re.MULTILINE)
STATUS_SERVER_PORT = re.compile(r"(\.svc:)\d+(/apis/trainer\.kubeflow\.org/)")
"""The TrainJobStatus plugin's ``KUBEFLOW_TRAINER_SERVER_URL``: each side's status server has its
own port (``--feature-gates TrainJobStatus=true``)."""
TLS_CONFIG_SUFFIX = "-tls-config"
"""The TrainJobStatus plugin's ConfigMaps: ``ca.crt`` is each side's own CA."""


def _strings(value: Any, fn: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, fn) for v in value]
    if isinstance(value, str):
        return fn(value)
    return value


class Normaliser:
    """Per side and scenario: learns the generated names it saw so references to them match."""

    def __init__(self, namespace: str, nodes: Iterable[str] = (), *, kueue: bool = False) -> None:
        self.namespace = namespace
        self.renames: dict[str, str] = {}
        self.nodes = set(nodes)
        self.kueue = kueue
        """Kueue runs in front of the managers: three things its timing decides are left out
        (``KUEUE_TIMING``): ``metadata.generation`` (how many spec writes an object got depends on
        how Kueue's writes and the manager's interleave), the scheduler's ``Pending`` events on
        Workloads (each retry's message says how far a preemption had got), and a manager's
        ``TrainJobResourcesCreationFailed`` or ``JobCreationFailed`` event for Kueue's JobSet or
        Job webhook refusing a JobSet or Job because Kueue's cache has not seen its owner yet
        (``KUEUE_CACHE_RACE``: retried at once; whichever side is faster meets it more often)."""

    def scalar(self, text: str) -> str:
        if text in self.nodes:  # a node assignment (e.g. a follower pinned to its leader's node)
            return "<node>"
        for old, new in self.renames.items():
            if old in text:
                text = text.replace(old, new)
        text = UUID.sub("<uid>", text)
        text = TIME.sub("<time>", text)
        text = STATUS_SERVER_PORT.sub(r"\1<status-port>\2", text)
        text = KUEUE_WAIT.sub(r"\1<seconds>", text)
        return text.replace(self.namespace, "<ns>") if self.namespace else text

    def strings(self, value: Any) -> Any:
        """``value`` with every string in it normalised (``scalar``), at any depth."""
        return _strings(value, self.scalar)

    def _metadata(self, meta: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in meta.items() if k not in METADATA_DROP}
        if "deletionTimestamp" in out:
            out["deletionTimestamp"] = "<set>"
        if "ownerReferences" in out:
            out["ownerReferences"] = [
                {k: v for k, v in ref.items() if k != "uid"} for ref in out["ownerReferences"]
            ]
        annotations = out.get("annotations") or {}
        annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
        return out

    def _pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        spec = dict(pod.get("spec") or {})
        for key in ("nodeName", "serviceAccount"):
            spec.pop(key, None)
        spec["volumes"] = [v for v in spec.get("volumes", []) if not v["name"].startswith("kube-api-access-")]
        for group in ("containers", "initContainers"):
            spec[group] = [
                {
                    **c,
                    "volumeMounts": [
                        m for m in c.get("volumeMounts", []) if not m["name"].startswith("kube-api-access-")
                    ],
                }
                for c in spec.get(group, [])
            ]
        status = pod.get("status") or {}
        return {"metadata": pod["metadata"], "spec": spec, "status": {"phase": status.get("phase")}}

    @staticmethod
    def _workload(workload: dict[str, Any]) -> dict[str, Any]:
        """Kueue's Workload: how long it ran before an eviction is counted in whole seconds
        (``accumulatedPastExecutionTimeSeconds``), which differs by the sides' pace alone."""
        status = workload.get("status") or {}
        if "accumulatedPastExecutionTimeSeconds" in status:
            status = {**status, "accumulatedPastExecutionTimeSeconds": "<seconds>"}
            return {**workload, "status": status}
        return workload

    def _service(self, svc: dict[str, Any]) -> dict[str, Any]:
        spec = dict(svc.get("spec") or {})
        if spec.get("clusterIP") not in (None, "None"):
            spec["clusterIP"] = "<ip>"
        spec["clusterIPs"] = [ip if ip == "None" else "<ip>" for ip in spec.get("clusterIPs", [])]
        return {**svc, "spec": spec}

    def _secret(self, secret: dict[str, Any]) -> dict[str, Any]:
        data = dict(secret.get("data") or {})
        random_type = secret.get("type") in ("kubernetes.io/ssh-auth", "kubernetes.io/tls")
        for key in data:
            if key == CURVE_CERT and not random_type:
                data[key] = self._curve_certificate(data[key])
            elif random_type or KEY_MATERIAL.search(key):
                data[key] = "<key material>"
        return {**secret, "data": data}

    @staticmethod
    def _curve_certificate(encoded: Any) -> str:
        """A Flux certificate as text with its two keys replaced (they follow the uid, which
        differs per side); the header, name and layout are still compared."""
        try:
            text = base64.b64decode(encoded, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, TypeError, ValueError):
            return "<key material>"
        return CURVE_KEYS.sub(r"\1<key material>\2", text)

    def _configmap(self, configmap: dict[str, Any]) -> dict[str, Any]:
        """A runtime snapshot's ``runtime`` compared as the document it is: parsed, with the
        runtime's volatile metadata dropped as any object's (the YAML's layout and quoting are
        the encoder's, not behaviour). Data that does not parse is compared as text."""
        data = configmap.get("data") or {}
        if configmap["metadata"]["name"].endswith(TLS_CONFIG_SUFFIX) and "ca.crt" in data:
            return {**configmap, "data": {**data, "ca.crt": "<key material>"}}
        if not configmap["metadata"]["name"].endswith(RUNTIME_SNAPSHOT_SUFFIX) or not isinstance(
            data.get("runtime"), str
        ):
            return configmap
        try:
            doc = yaml.safe_load(data["runtime"])
        except yaml.YAMLError:
            return configmap
        if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
            doc = {**doc, "metadata": self._metadata(doc["metadata"])}
        return {**configmap, "data": {**data, "runtime": doc}}

    def objects(self, kind: str, items: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        items = list(items)
        if kind == "Pod":
            for pod in items:
                name = pod["metadata"]["name"]
                if pod["metadata"].get("generateName") and (m := GENERATED.match(name)):
                    self.renames[name] = m["base"] + "-<gen>"
        elif kind == "Workload":
            for workload in items:
                if m := WORKLOAD_NAME.match(workload["metadata"]["name"]):
                    self.renames[workload["metadata"]["name"]] = m["base"] + "-<hash>"
        out: dict[str, dict[str, Any]] = {}
        ordered = sorted(
            items, key=lambda o: (o["metadata"]["name"], o["metadata"].get("creationTimestamp", ""))
        )
        for obj in ordered:
            if kind == "ConfigMap" and obj["metadata"]["name"] == "kube-root-ca.crt":
                continue
            if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
                continue
            obj = {**obj, "metadata": self._metadata(obj.get("metadata", {}))}
            if self.kueue:
                obj["metadata"].pop("generation", None)
            if kind == "Pod":
                obj = self._pod(obj)
            elif kind == "Service":
                obj = self._service(obj)
            elif kind == "Secret":
                obj = self._secret(obj)
            elif kind == "ConfigMap":
                obj = self._configmap(obj)
            elif kind == "Workload":
                obj = self._workload(obj)
            obj = self.strings(obj)
            base = f"{kind}/{obj['metadata']['name']}"
            key, n = base, 1
            while key in out:
                n += 1
                key = f"{base}#{n}"
            out[key] = obj
        return out

    @staticmethod
    def _kueue_timing(event: dict[str, Any], involved: dict[str, Any]) -> bool:
        """An event whose existence or text Kueue's timing decides (``kueue``)."""
        reason = event.get("reason")
        if involved.get("kind") == "Workload" and reason == "Pending":
            return True
        return reason in KUEUE_CACHE_RACE_REASONS and bool(
            KUEUE_CACHE_RACE.search(str(event.get("message") or ""))
        )

    def events(self, items: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The managers' events, keyed by object and reason (counts and repeats ignored): a
        different message shows as a difference of ``.message``."""
        distinct: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for event in items:
            component = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
            if component in KUBE_COMPONENTS:
                continue
            involved = event.get("involvedObject") or {}
            if self.kueue and self._kueue_timing(event, involved):
                continue
            entry = {
                "involvedObject": f"{involved.get('kind')}/{self.scalar(involved.get('name', ''))}",
                "type": event.get("type"),
                "reason": event.get("reason"),
                "message": self.scalar(event.get("message", "")),
            }
            ident = (str(entry["involvedObject"]), str(entry["reason"] or ""), str(entry["type"] or ""))
            distinct[(*ident, str(entry["message"]))] = entry
        out: dict[str, dict[str, Any]] = {}
        for key in sorted(distinct):
            base = f"Event/{key[0]}/{key[1]}"
            name, n = base, 1
            while name in out:
                n += 1
                name = f"{base}#{n}"
            out[name] = distinct[key]
        return out
