"""Admission fuzzing: generated AdmissionReviews POSTed over HTTPS to the product's webhook server.

The manager runs as the product does (``python -m trainer``, every component, debug logging) on
a real API server holding the shipped torch-distributed runtime. Hypothesis draws reviews for
all seven webhook paths (``admission_fuzz``): valid, near-valid and hostile objects, CREATE,
UPDATE with old objects, DELETE and CONNECT, and hostile envelopes. Every answer must be what
controller-runtime would give: HTTP 200 with an AdmissionReview, never code 500, a denial that
names the field and the reason, ill-typed objects answered 400. Afterwards the log holds no
traceback and no error entry, and the server's resident memory is flat.

``FUZZ_EXAMPLES`` sets the number of examples (``make test-fuzz``: 10,000; ``make test``: the
default below, about a minute).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import admission_fuzz as af
from hypothesis import HealthCheck, Phase, given, seed, settings
from trainer_process import RunningManager, running_manager

from manager.envtest import Environment

# Deeply nested values (900 levels) are copied and encoded by the generator: recursion must not
# depend on the caller's stack depth, or hypothesis replays draw differently.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "800"))
MAX_BODY = 7 * 1024 * 1024  # controller-runtime's maxRequestSize
ROOT = Path(__file__).resolve().parents[3]
Json = dict[str, Any]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def log_problems(log_path: Path, start: int = 0, namespace: str | None = None) -> list[str]:
    """Tracebacks and error entries of the manager's JSON log from byte ``start`` on; with
    ``namespace``, reconcile errors about objects of other namespaces are not counted: the
    control plane is shared with earlier tests, whose leftovers (a namespace still terminating,
    a runtime deleted with its test) the cluster-wide manager reconciles too, and fails on, as
    it should."""
    problems = []
    with log_path.open("rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if "Traceback" in line or "Error" in line:
                problems.append(line)
            continue
        elsewhere = namespace is not None and entry.get("namespace") not in (None, namespace)
        if elsewhere and "stacktrace" not in entry and "Traceback" not in line:
            continue
        if (
            entry.get("level") in ("error", "dpanic", "panic", "fatal")
            or "stacktrace" in entry
            or any("Traceback" in str(v) for v in entry.values())
        ):
            problems.append(line[:2000])
    return problems


def fuzz(manager: RunningManager, namespace: str, examples: int) -> dict[str, Any]:
    """Runs hypothesis in this (worker) thread; returns the figures."""
    poster = af.Poster(manager.webhook_port, manager.ca.cert_pem)
    stats: dict[str, Any] = {
        "codes": collections.Counter(),
        "paths": collections.Counter(),
        "kinds": collections.Counter(),  # the kind of the object in the review, as sent
        "operations": collections.Counter(),
        "examples": 0,
    }
    rss: dict[str, Any] = {"start": rss_kib(manager.proc.pid), "tenths": []}
    warmup = max(1, examples // 5)
    tenth = max(1, examples // 10)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=os.environ.get("FUZZ_SEED") is None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(af.admission_reviews(namespace))
    def one(drawn: tuple[str, Json]) -> None:
        path, review = drawn
        status, body = poster.post(path, af.encode(review))
        response = af.check_answer(review, status, body)
        stats["examples"] += 1
        stats["paths"][path] += 1
        stats["kinds"][af.object_kind(review)] += 1
        stats["operations"][af.operation(review)] += 1
        code = (response.get("status") or {}).get("code", 200)
        stats["codes"][f"{code} {'allowed' if response.get('allowed') else 'denied'}"] += 1
        if stats["examples"] == warmup:
            rss["warm"] = rss_kib(manager.proc.pid)
        if stats["examples"] % tenth == 0:
            rss["tenths"].append(rss_kib(manager.proc.pid))

    if os.environ.get("FUZZ_SEED"):
        one = seed(int(os.environ["FUZZ_SEED"]))(one)
    started = time.monotonic()
    try:
        one()
    finally:
        poster.close()
    stats["seconds"] = round(time.monotonic() - started, 1)
    rss["end"] = rss_kib(manager.proc.pid)
    # afterwards: idle past two of the manager's 5 s heap trims, then read again
    time.sleep(12)
    rss["idle"] = rss_kib(manager.proc.pid)
    stats["rss_kib"] = rss
    return stats


async def test_fuzzed_admission_reviews_get_controller_runtime_answers(
    control_plane: Environment, namespace: str, tmp_path: Path
) -> None:
    await control_plane.apply_manifests([ROOT / "config" / "runtimes" / "torch-distributed.yaml"])
    async with running_manager(control_plane, tmp_path, args=["--zap-log-level=debug"]) as manager:
        start = manager.log_path.stat().st_size  # startup messages are not the fuzzer's concern
        stats = await asyncio.to_thread(fuzz, manager, namespace, EXAMPLES)
        rss = stats["rss_kib"]
        print(f"\nadmission fuzz: {json.dumps(stats, default=dict, indent=1)}")
        (tmp_path / "figures.json").write_text(json.dumps(stats, default=dict))
        assert stats["examples"] >= EXAMPLES * 0.9, stats
        # every path was exercised, with allowed and denied answers and ill-typed (400) ones
        assert set(stats["paths"]) == set(af.PATHS), stats["paths"]
        codes = stats["codes"]
        assert codes["200 allowed"] and codes["400 denied"] and codes["403 denied"], codes
        # memory flat: after the warm-up fifth, less than 40 MiB more at the end
        assert rss["end"] - rss["warm"] < 40 * 1024, f"RSS grew from {rss['warm']} KiB to {rss['end']} KiB"
        assert rss["idle"] - rss["warm"] < 40 * 1024, f"RSS idle at {rss['idle']} KiB after {rss['warm']} KiB"
        # a body over controller-runtime's limit is refused with 413 in the review, the server serves on
        poster = af.Poster(manager.webhook_port, manager.ca.cert_pem)
        try:
            status, body = poster.post(next(iter(af.PATHS)), b'{"pad": "' + b"x" * MAX_BODY + b'"}')
            assert status == 200, status
            assert json.loads(body)["response"]["status"] == {
                "code": 413,
                "message": f"request entity is too large; limit is {MAX_BODY} bytes",
                "status": "Failure",
            }
        finally:
            poster.close()
        await manager.ready()
    problems = log_problems(manager.log_path, start, namespace)
    assert not problems, "\n".join(p[:1500] for p in problems[:5])
