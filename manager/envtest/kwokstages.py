"""KWOK pod stages with a configurable run time, so tests can see pods that are still running.

Why: with no Stage given, KWOK v0.7.0 uses its built-in "fast" pod stages, under which a Job's
pod goes from Running to Succeeded as soon as KWOK sees it running -- about a second after it
was created. Anything that must observe an active Job or a started-but-not-finished replica
(startup order, a spec that waits for a Job to be active) then races KWOK. KWOK reads Stage
objects from its ``--config`` file; when the file holds at least one stage for ``v1/Pod``, KWOK
uses those instead of all its built-in pod stages (``pkg/kwok/cmd/root.go``), so the three pod
transitions are all given here:

* ``pod-ready``: a scheduled pod without an IP becomes Running and Ready at once (conditions,
  container statuses, IPs, start time);
* ``pod-complete``: a Running pod owned by a Job becomes Succeeded after ``run_seconds``
  (the stage's ``delay.durationMilliseconds``, optionally plus a random jitter up to
  ``jitter_seconds``); the other pod fields stay as ``pod-ready`` left them;
* ``pod-delete``: a pod being deleted loses its finalizers and is removed at once.

The status templates are Go templates evaluated by KWOK (``Now``, ``Quote``, ``NodeIPWith``,
``PodIPWith`` are KWOK's template functions).
"""

from __future__ import annotations

from typing import Any

__all__ = ["pod_stages"]

_STAGE_API = "kwok.x-k8s.io/v1alpha1"
_POD = {"apiGroup": "v1", "kind": "Pod"}
_NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

_RUNNING_STATUS = """\
{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ range .spec.readinessGates }}
- {type: {{ .conditionType | Quote }}, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
{{ if eq .restartPolicy "Always" }}
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ else }}
  state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}
{{ end }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

_SUCCEEDED_STATUS = """\
{{ $now := Now }}
{{ $started := .status.startTime }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $started | Quote }}, finishedAt: {{ $now | Quote }}}}
{{ end }}
phase: Succeeded
"""


def _millis(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def pod_stages(run_seconds: float, jitter_seconds: float = 0.0) -> list[dict[str, Any]]:
    """The three pod Stage objects: Job pods run ``run_seconds`` (plus up to ``jitter_seconds``)."""
    if run_seconds < 0 or jitter_seconds < 0:
        raise ValueError(f"pod run time must not be negative (run {run_seconds}s, jitter {jitter_seconds}s)")
    delay: dict[str, Any] = {"durationMilliseconds": _millis(run_seconds)}
    if jitter_seconds > 0:
        delay["jitterDurationMilliseconds"] = _millis(run_seconds + jitter_seconds)
    return [
        {
            "apiVersion": _STAGE_API,
            "kind": "Stage",
            "metadata": {"name": "pod-ready"},
            "spec": {
                "resourceRef": _POD,
                "selector": {
                    "matchExpressions": [_NOT_DELETING, {"key": ".status.podIP", "operator": "DoesNotExist"}]
                },
                "next": {"statusTemplate": _RUNNING_STATUS},
            },
        },
        {
            "apiVersion": _STAGE_API,
            "kind": "Stage",
            "metadata": {"name": "pod-complete"},
            "spec": {
                "resourceRef": _POD,
                "selector": {
                    "matchExpressions": [
                        _NOT_DELETING,
                        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                        {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
                    ]
                },
                "delay": delay,
                "next": {"statusTemplate": _SUCCEEDED_STATUS},
            },
        },
        {
            "apiVersion": _STAGE_API,
            "kind": "Stage",
            "metadata": {"name": "pod-delete"},
            "spec": {
                "resourceRef": _POD,
                "selector": {
                    "matchExpressions": [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}]
                },
                "next": {"finalizers": {"empty": True}, "delete": True},
            },
        },
    ]
