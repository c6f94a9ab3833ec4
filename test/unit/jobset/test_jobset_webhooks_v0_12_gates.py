"""JobSet v0.12.0's webhook rules behind its feature gates (docs/behaviour/jobset-v0.12.md §2.7),
each with the gate on and off, through the validating handler a user's request reaches.
Scenarios from upstream's ``pkg/webhooks/jobset_webhook_test.go``."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from jsfixtures import JS_NAME, jobset, rjob
from test_jobset_webhooks_v0_12 import INVALID, V0_10, V0_12, create, update

from trainer import features

Object = dict[str, Any]
MAX_INT32 = 2147483647
PATH = "spec.replicatedJobs[0].template.spec"


@pytest.fixture(autouse=True)
def _fresh_gates() -> Iterator[None]:
    features.reset()
    yield
    features.reset()


def in_place(**job_spec: Any) -> Object:
    """A JobSet restarting in place whose one replicated job suits it, but for ``job_spec``."""
    job = rjob("rj", 2, parallelism=2, completions=2)
    spec = job["template"]["spec"]
    spec.update(backoffLimit=MAX_INT32, podReplacementPolicy="Failed")
    for key, value in job_spec.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return jobset(job, failurePolicy={"maxRestarts": 3, "restartStrategy": "InPlaceRestart"})


# -- InPlaceRestart -------------------------------------------------------------------------------


async def test_in_place_restart_is_admitted_with_its_gate() -> None:
    with features.override("InPlaceRestart", True):
        assert (await create(V0_12, in_place())).allowed
    answer = await create(V0_12, in_place())
    assert answer.message == INVALID + (
        "<nil>: Internal error: InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate "
        "is disabled"
    )


@pytest.mark.parametrize(
    ("job_spec", "error"),
    [
        (
            {"backoffLimit": 6},
            f"{PATH}.backoffLimit: Invalid value: 6: replicatedJob rj: must be set to 2147483647 (MaxInt32) when "
            "in-place restart is enabled",
        ),
        (
            {"backoffLimit": None},
            f"{PATH}.backoffLimit: Invalid value: null: replicatedJob rj: must be set to 2147483647 (MaxInt32) "
            "when in-place restart is enabled",
        ),
        (
            {"podReplacementPolicy": "TerminatingOrFailed"},
            f'{PATH}.podReplacementPolicy: Invalid value: "TerminatingOrFailed": replicatedJob rj: must be set to '
            "Failed when in-place restart is enabled",
        ),
        (
            {"completions": 3},
            f"{PATH}.completions: Invalid value: 3: replicatedJob rj: completions and parallelism must be set and "
            "equal to each other when in-place restart is enabled",
        ),
        (
            {"completions": None},
            f"{PATH}.completions: Invalid value: null: replicatedJob rj: completions and parallelism must be set "
            "and equal to each other when in-place restart is enabled",
        ),
        (
            {"parallelism": None},
            f"{PATH}.completions: Invalid value: 2: replicatedJob rj: completions and parallelism must be set and "
            "equal to each other when in-place restart is enabled",
        ),
    ],
)
async def test_in_place_restart_rules_of_each_replicated_job(job_spec: Object, error: str) -> None:
    with features.override("InPlaceRestart", True):
        answer = await create(V0_12, in_place(**job_spec))
    assert (answer.allowed, answer.code) == (False, 422)
    assert answer.message == INVALID + error
    # a field error keeps its field in the causes
    assert answer.details is not None
    assert [c["field"] for c in answer.details["causes"]] == [error.split(":")[0]]


async def test_the_in_place_rules_only_apply_to_that_strategy() -> None:
    js = in_place(backoffLimit=6)
    js["spec"]["failurePolicy"]["restartStrategy"] = "Recreate"
    with features.override("InPlaceRestart", True):
        assert (await create(V0_12, js)).allowed


# -- RestartJob -----------------------------------------------------------------------------------


def restart_job_jobset(action: str, replicas: int = 2, rule_name: str = "perJob") -> Object:
    rules = [{"name": rule_name, "action": action}]
    return jobset(rjob("a", replicas), rjob("b", 1), failurePolicy={"maxRestarts": 2, "rules": rules})


@pytest.mark.parametrize("action", ["RestartJob", "RestartJobAndIgnoreMaxRestarts"])
async def test_restart_job_actions_are_admitted_with_the_gate(action: str) -> None:
    with features.override("RestartJob", True):
        assert (await create(V0_12, restart_job_jobset(action))).allowed
        answer = await create(V0_12, restart_job_jobset(action, replicas=1025))
    assert answer.message == INVALID + (
        "<nil>: Internal error: JobSet cannot have a failure policy rule with RestartJob or "
        "RestartJobAndIgnoreMaxRestarts action and a replicated job with replicas > 1024"
    )
    with features.override("RestartJob", True):
        assert (await create(V0_12, restart_job_jobset(action, replicas=1024))).allowed


async def test_with_the_gate_the_rules_own_checks_go_on() -> None:
    js = restart_job_jobset("RestartJob", replicas=2000, rule_name="1bad")
    with features.override("RestartJob", True):
        answer = await create(V0_12, js)
    assert answer.message == INVALID + (
        "[<nil>: Internal error: JobSet cannot have a failure policy rule with RestartJob or "
        "RestartJobAndIgnoreMaxRestarts action and a replicated job with replicas > 1024, <nil>: Internal error: "
        "invalid failure policy rule name '1bad', a failure policy rule name must start with an alphabetic "
        "character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an "
        "alphanumeric character or '_']"
    )


async def test_v0_10_knows_no_gate_whatever_is_set() -> None:
    """Level v2.1 never reads these gates (the entry point refuses them there)."""
    js = in_place(backoffLimit=6)
    with features.override("InPlaceRestart", True), features.override("RestartJob", True):
        assert (await create(V0_10, js)).allowed


# -- ElasticJobSet --------------------------------------------------------------------------------


def elastic(
    parallelism: int | None, completions: int | None, *, mode: str = "Indexed", replicas: int = 1
) -> Object:
    return jobset(
        rjob("w", replicas, parallelism=parallelism, completions=completions, completion_mode=mode),
        rjob("x", 1),
    )


def finished(js: Object, condition: str) -> Object:
    js = copy.deepcopy(js)
    js["status"] = {
        "conditions": [
            {
                "type": condition,
                "status": "True",
                "reason": "r",
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    return js


async def test_scaling_an_indexed_replicated_job_with_the_gate() -> None:
    """upstream integration: updating parallelism and completions is allowed with ElasticJobSet."""
    with features.override("ElasticJobSet", True):
        assert (await update(V0_12, elastic(2, 2), elastic(4, 4))).allowed
        assert (await update(V0_12, elastic(4, 4), elastic(1, 1))).allowed
    answer = await update(V0_12, elastic(2, 2), elastic(4, 4))
    assert (answer.allowed, answer.code) == (False, 422)
    assert answer.message.startswith(INVALID + "spec.replicatedJobs: Invalid value: ")
    assert answer.message.endswith(": field is immutable")


@pytest.mark.parametrize(
    ("old", "new", "errors"),
    [
        (
            elastic(2, 2),
            elastic(0, 0),
            [
                f"{PATH}.parallelism: Invalid value: 0: parallelism must be >= 1",
                f"{PATH}.completions: Invalid value: 0: completions must be >= 1",
            ],
        ),
        (
            elastic(2, 2),
            elastic(4, 3),
            [
                f"{PATH}.completions: Invalid value: 3: completions must be equal to parallelism for Elastic Indexed Jobs"
            ],
        ),
        (
            finished(elastic(2, 2), "Completed"),
            elastic(4, 4),
            [
                f"{PATH}: Forbidden: Cannot mutate parallelism or completions when JobSet is in a terminal state "
                "(Completed or Failed)"
            ],
        ),
        (
            finished(elastic(2, 2), "Failed"),
            elastic(2, 4),
            [
                f"{PATH}: Forbidden: Cannot mutate parallelism or completions when JobSet is in a terminal state "
                "(Completed or Failed)"
            ],
        ),
    ],
)
async def test_scaling_rules(old: Object, new: Object, errors: list[str]) -> None:
    with features.override("ElasticJobSet", True):
        answer = await update(V0_12, old, new)
    expected = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    assert answer.message == INVALID + expected


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # NonIndexed: the immutability check still refuses a scale
        (elastic(2, 2, mode="NonIndexed"), elastic(4, 4, mode="NonIndexed")),
        # another immutable field changed together with a valid scale
        (elastic(2, 2), elastic(4, 4, replicas=2)),
    ],
)
async def test_what_stays_immutable_with_the_gate(old: Object, new: Object) -> None:
    with features.override("ElasticJobSet", True):
        answer = await update(V0_12, old, new)
    assert answer.message.startswith(INVALID + "spec.replicatedJobs: Invalid value: ")
    assert answer.message.endswith(": field is immutable")


async def test_scaling_is_judged_before_the_immutability_check() -> None:
    with features.override("ElasticJobSet", True):
        answer = await update(V0_12, elastic(2, 2), elastic(0, 0, replicas=2))
    assert answer.message.startswith(
        f'JobSet.jobset.x-k8s.io "{JS_NAME}" is invalid: [{PATH}.parallelism: Invalid value: 0: parallelism '
        f"must be >= 1, {PATH}.completions: Invalid value: 0: completions must be >= 1, spec.replicatedJobs: "
        "Invalid value: "
    )


async def test_v0_10_scaling_is_immutable_whatever_is_set() -> None:
    with features.override("ElasticJobSet", True):
        answer = await update(V0_10, elastic(2, 2), elastic(4, 4))
    assert (answer.allowed, answer.code) == (False, 403)
    assert answer.message.endswith("field is immutable")


async def test_the_immutability_error_prints_the_replicated_jobs_as_compared() -> None:
    """Go prints its munged copy: a scale that comes with another change shows the old
    parallelism and completions (conformance invalid-inputs, with the gate on, found ours
    printing the new ones)."""
    new = elastic(4, 4)
    new["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = "b:2"
    with features.override("ElasticJobSet", True):
        answer = await update(V0_12, elastic(2, 2), new)
    assert answer.message.endswith(": field is immutable"), answer.message
    assert '"parallelism":2,"completions":2' in answer.message, answer.message
    assert '"image":"b:2"' in answer.message, answer.message
