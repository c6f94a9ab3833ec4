"""KWOK pod stages with a configurable run time, so tests can see pods that are still running.

Why: with no Stage given, KWOK v0.7.0 uses its built-in "fast" pod stages, under which a Job's
pod goes from Running to Succeeded as soon as KWOK sees it running -- about a second after it
was created. Anything that must observe an active Job or a started-but-not-finished replica
(startup order, a spec that waits for a Job to be active) then races KWOK. KWOK reads Stage
objects from its ``--config`` file; when the file holds at least one stage for ``v1/Pod``, KWOK
uses those instead of all its built-in pod stages (``pkg/kwok/cmd/root.go``), so the three pod
transitions are all given here:

* ``pod-ready``: a scheduled pod without an IP becomes Running and Ready (conditions,
  container statuses, IPs, start time), at once or, with ``start_seconds``, that long after it
  was scheduled (the time a kubelet spends pulling images and starting containers: meanwhile the
  pod is Pending, which a Job counts as active but not ready);
* ``pod-complete``: a Running pod owned by a Job becomes Succeeded after ``run_seconds``
  (the stage's ``delay.durationMilliseconds``, optionally plus a random jitter up to
  ``jitter_seconds``), or, without jitter, after the seconds its ``RUN_SECONDS_ANNOTATION`` says
  (a pod that must run longer than the others: ``delay.durationFrom``, a jq expression over the
  pod); the other
  pod fields stay as ``pod-ready`` left them;
* ``pod-delete``: a pod being deleted loses its finalizers and is removed at once.

With ``probe_delays=True`` a pod whose containers have a readiness or startup probe starts
Running but not Ready, and a fourth stage, ``pod-probed-ready``, makes it Ready after the
largest ``initialDelaySeconds`` of those probes (read from the pod by a jq expression: a kubelet
whose first probe succeeds). Only a Ready pod completes, so such a pod's run time counts from
its readiness. Upstream's e2e suites rely on both: a coordinator whose startup probe delays its
readiness, an MPI node (an sshd that runs until its JobSet ends) that is still active when its
launcher succeeds.

The status templates are Go templates evaluated by KWOK (``Now``, ``Quote``, ``NodeIPWith``,
``PodIPWith`` are KWOK's template functions).
"""

from __future__ import annotations

from manager.meta.object import Json

__all__ = ["RUN_SECONDS_ANNOTATION", "pod_run_seconds", "pod_stages"]

RUN_SECONDS_ANNOTATION = "envtest.trainer.kubeflow.org/pod-run-seconds"
"""A pod annotation: how many seconds this Job pod runs before it succeeds (a decimal number),
instead of the stages' ``run_seconds``."""

_STAGE_API = "kwok.x-k8s.io/v1alpha1"
_POD = {"apiGroup": "v1", "kind": "Pod"}
_NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

_RUNNING_STATUS = """\
{{ $now := Now }}
{{ $ready := "true" }}
{{ if PROBED }}{{ range .spec.containers }}{{ if or .readinessProbe .startupProbe }}\
{{ $ready = "false" }}{{ end }}{{ end }}{{ end }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: {{ if eq $ready "true" }}"True"{{ else }}"False"{{ end }}, \
lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: {{ if eq $ready "true" }}"True"{{ else }}"False"{{ end }}, \
lastTransitionTime: {{ $now | Quote }}}
{{ range .spec.readinessGates }}
- {type: {{ .conditionType | Quote }}, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: {{ $ready }}
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


# The probed pod's readiness: conditions and container statuses rewritten whole (KWOK replaces
# lists), times of the start kept.
_PROBED_READY_STATUS = """\
{{ $now := Now }}
{{ $started := .status.startTime }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $started | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ range .spec.readinessGates }}
- {type: {{ .conditionType | Quote }}, status: "True", lastTransitionTime: {{ $started | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $started | Quote }}}}
{{ end }}
"""

# jq over the pod: the largest initialDelaySeconds of its readiness and startup probes, as a Go
# duration ("5s"), which KWOK's delay.durationFrom parses.
_PROBE_DELAY_JQ = (
    "[.spec.containers[] | (.readinessProbe.initialDelaySeconds // 0), "
    '(.startupProbe.initialDelaySeconds // 0)] | max | tostring + "s"'
)
_READY_IS = '.status.conditions[]? | select(.type == "Ready") | .status'


# jq over the pod: its run-time annotation as a Go duration ("30s"); nothing (the stage's own
# delay) without it.
_RUN_SECONDS_JQ = f'.metadata.annotations["{RUN_SECONDS_ANNOTATION}"] // empty | tostring + "s"'


def pod_run_seconds(pod: Json, default: float) -> float:
    """How long the ``pod-complete`` stage keeps ``pod`` Running: its annotation, else ``default``."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def _millis(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def pod_stages(
    run_seconds: float,
    jitter_seconds: float = 0.0,
    *,
    start_seconds: float = 0.0,
    probe_delays: bool = False,
) -> list[Json]:
    """The pod Stage objects: Job pods run ``run_seconds`` (plus up to ``jitter_seconds``), pods
    start ``start_seconds`` after they are scheduled, and with ``probe_delays`` a probed pod is
    Ready only after its probes' initial delay."""
    if run_seconds < 0 or jitter_seconds < 0 or start_seconds < 0:
        raise ValueError(
            f"pod times must not be negative (run {run_seconds}s, jitter {jitter_seconds}s, "
            f"start {start_seconds}s)"
        )
    delay: Json = {"durationMilliseconds": _millis(run_seconds)}
    if jitter_seconds > 0:
        delay["jitterDurationMilliseconds"] = _millis(run_seconds + jitter_seconds)
    else:  # (KWOK caps a delay at its jitter bound: the annotation is read without jitter only)
        delay["durationFrom"] = {"expressionFrom": _RUN_SECONDS_JQ}
    ready: Json = {
        "resourceRef": _POD,
        "selector": {
            "matchExpressions": [_NOT_DELETING, {"key": ".status.podIP", "operator": "DoesNotExist"}]
        },
        "next": {"statusTemplate": _RUNNING_STATUS.replace("PROBED", "true" if probe_delays else "false")},
    }
    if start_seconds > 0:
        ready["delay"] = {"durationMilliseconds": _millis(start_seconds)}
    complete_when = [
        _NOT_DELETING,
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
    ]
    probed: list[Json] = []
    if probe_delays:
        complete_when.append({"key": _READY_IS, "operator": "In", "values": ["True"]})
        probed.append(
            {
                "apiVersion": _STAGE_API,
                "kind": "Stage",
                "metadata": {"name": "pod-probed-ready"},
                "spec": {
                    "resourceRef": _POD,
                    "selector": {
                        "matchExpressions": [
                            _NOT_DELETING,
                            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                            {"key": _READY_IS, "operator": "In", "values": ["False"]},
                        ]
                    },
                    "delay": {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": _PROBE_DELAY_JQ}},
                    "next": {"statusTemplate": _PROBED_READY_STATUS},
                },
            }
        )
    return [
        {"apiVersion": _STAGE_API, "kind": "Stage", "metadata": {"name": "pod-ready"}, "spec": ready},
        *probed,
        {
            "apiVersion": _STAGE_API,
            "kind": "Stage",
            "metadata": {"name": "pod-complete"},
            "spec": {
                "resourceRef": _POD,
                "selector": {"matchExpressions": complete_when},
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
