"""Feature gates of the Trainer manager (upstream ``pkg/features``).

Every gate is off by default: with no ``featureGates`` in the Configuration the manager behaves
as Trainer v2.1.0. Gates are set once at start-up from the Configuration's ``featureGates``
(then from ``--feature-gates``, which overrides), and read with :func:`enabled`.

A gate name the manager does not know is a configuration error naming it (as upstream's
``unrecognized feature gate: <name>``), never silently ignored.

The manager is also the JobSet manager, so the gates of its JobSet release are here too, with
upstream's names (``sigs.k8s.io/jobset`` ``pkg/features``; ``FeatureSpec.component`` says
whose they are). A JobSet release has only its own gates: which ones is the API level's
(``trainer.jobset.levels.JobSetLevel.feature_gates``), and the entry point refuses a gate the
level's release does not have (``trainer.levels.check.feature_gate_errors``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

# Enables the status server to which TrainJob pods report progress, ETA and metrics
# (KEP-2779, upstream v2.2 ``TrainJobStatus``), the injection of its URL, CA and token into
# trainer pods, and the gate-on CRD variant with ``status.trainerStatus`` and printer columns.
TrainJobStatus = "TrainJobStatus"

# The controller writes one derived state (Pending, Suspended, Running, Complete, Failed) to
# ``status.state`` and the gate-on CRD variant's ``State`` printer column reads it instead of
# the last condition's type (beyond v2.1, see docs/divergences.md; upstream kubeflow/trainer#2713, #3666).
TrainJobState = "TrainJobState"

# JobSet v0.12.0's gates (KEP-467): the restart strategy ``InPlaceRestart``, where the pods'
# agents restart their containers in place and the controller keeps the JobSet's in-place
# restart attempts in its status (docs/behaviour/jobset-v0.12.md §1.10).
InPlaceRestart = "InPlaceRestart"

# JobSet v0.12.0 (KEP-262): the failure-policy actions ``RestartJob`` and
# ``RestartJobAndIgnoreMaxRestarts``, which recreate only the failed Job (jobset-v0.12.md §1.9).
RestartJob = "RestartJob"

# JobSet v0.12.0 (KEP-463): a running JobSet's Indexed replicated jobs may change
# ``parallelism`` and ``completions``, patched into their active Jobs (jobset-v0.12.md §1.11).
ElasticJobSet = "ElasticJobSet"

TRAINER = "trainer"
JOBSET = "jobset"


@dataclass(frozen=True)
class FeatureSpec:
    default: bool
    pre_release: str  # "Alpha", "Beta", "GA"
    component: str = TRAINER
    """Whose gate it is: ``trainer`` (Kubeflow Trainer's, or this manager's own) or ``jobset``
    (a JobSet release's, valid only at an API level whose JobSet release has it)."""


KNOWN: Mapping[str, FeatureSpec] = {
    TrainJobStatus: FeatureSpec(default=False, pre_release="Alpha"),
    TrainJobState: FeatureSpec(default=False, pre_release="Alpha"),
    InPlaceRestart: FeatureSpec(default=False, pre_release="Alpha", component=JOBSET),
    RestartJob: FeatureSpec(default=False, pre_release="Alpha", component=JOBSET),
    ElasticJobSet: FeatureSpec(default=False, pre_release="Alpha", component=JOBSET),
}

_overrides: dict[str, bool] = {}


class FeatureGateError(ValueError):
    """An unknown gate name or a value that is not a boolean."""


def _check(name: str) -> None:
    if name not in KNOWN:
        raise FeatureGateError(f"unrecognized feature gate: {name}")


def validate(gates: Mapping[str, object]) -> list[str]:
    """The errors of a ``featureGates`` map, one per bad entry, naming the gate."""
    errors = []
    for name in sorted(gates):
        value = gates[name]
        if name not in KNOWN:
            errors.append(f"featureGates.{name}: unrecognized feature gate: {name}")
        elif not isinstance(value, bool):
            errors.append(f"featureGates.{name}: Invalid value: {value!r}: must be true or false")
    return errors


def set_from_map(gates: Mapping[str, bool]) -> None:
    """Apply ``featureGates`` from the Configuration; unknown names raise before anything changes."""
    errors = validate(gates)
    if errors:
        raise FeatureGateError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    _overrides.update(gates)


def parse_flag(text: str) -> dict[str, bool]:
    """``--feature-gates=A=true,B=false`` as a map (component-base's flag syntax)."""
    out: dict[str, bool] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        _check(name)
        value = raw.strip().lower()
        if value not in ("true", "false"):
            raise FeatureGateError(f"invalid value of {name}={raw.strip()}, err: must be true or false")
        out[name] = value == "true"
    return out


def of_component(gates: Mapping[str, bool], component: str) -> dict[str, bool]:
    """The entries of a ``featureGates`` map that are ``component``'s gates (unknown names left out)."""
    return {
        name: value for name, value in gates.items() if name in KNOWN and KNOWN[name].component == component
    }


def named() -> frozenset[str]:
    """The gates the Configuration or the flag named (on or off)."""
    return frozenset(_overrides)


def enabled(name: str) -> bool:
    """Whether the gate is on; asking about an unknown gate is a programming error."""
    _check(name)
    return _overrides.get(name, KNOWN[name].default)


def reset() -> None:
    """Back to the defaults (tests, and a fresh start of ``main``)."""
    _overrides.clear()


@contextmanager
def override(name: str, value: bool) -> Iterator[None]:
    """Set one gate for the duration of a block (upstream's SetFeatureGateDuringTest)."""
    _check(name)
    had = name in _overrides
    old = _overrides.get(name)
    _overrides[name] = value
    try:
        yield
    finally:
        if had and old is not None:
            _overrides[name] = old
        else:
            _overrides.pop(name, None)
