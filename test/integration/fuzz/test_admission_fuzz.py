"""Admission fuzzing: generated AdmissionReviews POSTed over HTTPS to the product's webhook server, at each API level.

The manager runs as the product does (``python -m trainer --api-level=<level>``, every component,
debug logging) on a real API server with the level's CRDs holding the runtimes the level's
TrainJobs name (``FuzzLevel.runtimes``; conftest.py). Hypothesis draws reviews for every webhook
path of the level (``admission_fuzz``: seven at v2.1, eight at v2.3 with the TrainJob
defaulter): valid, near-valid and hostile objects of the level, CREATE, UPDATE with old
objects, DELETE and CONNECT, and hostile envelopes. Every answer must be what controller-runtime
(v0.22 at v2.1, v0.24 at v2.3) would give: HTTP 200 with an AdmissionReview, never code 500, a
denial that names the field and the reason with a code the level's Go webhook gives (v2.3's
JobSet refusals 422 ``Invalid``), ill-typed objects answered 400. Afterwards the log holds no
traceback and no error entry, and the server's resident memory is flat.

``FUZZ_EXAMPLES`` sets the number of examples per level (``make test-fuzz``: 10,000; ``make
test``: the default below, about a minute per level).
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
from trainer_process import RunningManager, running_manager

from manager.envtest import Environment

# Deeply nested values (900 levels) are copied and encoded by the generator: recursion must not
# depend on the caller's stack depth, or hypothesis replays draw differently.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "800"))
MAX_BODY = 7 * 1024 * 1024  # controller-runtime's maxRequestSize
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


def fuzz(level: af.FuzzLevel, manager: RunningManager, namespace: str, examples: int) -> dict[str, Any]:
    """Runs hypothesis in this (worker) thread; returns the figures."""
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

    def tally(path: str, review: Json, response: Json) -> None:
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

    started = time.monotonic()
    af.fuzz_webhook_server(manager.webhook_port, manager.ca.cert_pem, namespace, examples, tally, level)
    stats["seconds"] = round(time.monotonic() - started, 1)
    rss["end"] = rss_kib(manager.proc.pid)
    # afterwards: idle past two of the manager's 5 s heap trims, then read again
    time.sleep(12)
    rss["idle"] = rss_kib(manager.proc.pid)
    stats["rss_kib"] = rss
    return stats


async def test_fuzzed_admission_reviews_get_controller_runtime_answers(
    fuzz_level: af.FuzzLevel,
    level_env: Environment,
    level_namespace: str,
    level_runtimes: None,
    tmp_path: Path,
) -> None:
    args = [f"--api-level={fuzz_level.name}", "--zap-log-level=debug"]
    async with running_manager(level_env, tmp_path, args=args) as manager:
        start = manager.log_path.stat().st_size  # startup messages are not the fuzzer's concern
        stats = await asyncio.to_thread(fuzz, fuzz_level, manager, level_namespace, EXAMPLES)
        rss = stats["rss_kib"]
        print(f"\nadmission fuzz at level {fuzz_level.name}: {json.dumps(stats, default=dict, indent=1)}")
        (tmp_path / "figures.json").write_text(json.dumps(stats, default=dict))
        assert stats["examples"] >= EXAMPLES * 0.9, stats
        # every path was exercised, with allowed and denied answers and ill-typed (400) ones
        assert set(stats["paths"]) == set(fuzz_level.paths), stats["paths"]
        codes = stats["codes"]
        assert codes["200 allowed"] and codes["400 denied"] and codes["403 denied"], codes
        # memory flat: after the warm-up fifth, less than 40 MiB more at the end
        assert rss["end"] - rss["warm"] < 40 * 1024, f"RSS grew from {rss['warm']} KiB to {rss['end']} KiB"
        assert rss["idle"] - rss["warm"] < 40 * 1024, f"RSS idle at {rss['idle']} KiB after {rss['warm']} KiB"
        # a body over controller-runtime's limit is refused with 413 in the review, the server serves on
        poster = af.Poster(manager.webhook_port, manager.ca.cert_pem)
        try:
            status, body = poster.post(next(iter(fuzz_level.paths)), b'{"pad": "' + b"x" * MAX_BODY + b'"}')
            assert status == 200, status
            assert json.loads(body)["response"]["status"] == {
                "code": 413,
                "message": f"request entity is too large; limit is {MAX_BODY} bytes",
                "status": "Failure",
            }
        finally:
            poster.close()
        await manager.ready()
    problems = log_problems(manager.log_path, start, level_namespace)
    assert not problems, "\n".join(p[:1500] for p in problems[:5])
