"""Fuzzed AdmissionReviews as conformance ``WebhookRequest`` documents: the Go originals as the oracle.

The fuzz tests check properties of every answer (``admission_fuzz.check_answer``); whether an
answer is the very one the Go webhook gives, only the Go webhook can say. This writes the
fuzzer's reviews of one API level as a scenario file for ``trainer conformance``, which POSTs each
to both managers' webhook servers and prints every difference::

    .venv/bin/python test/conformance_fuzz.py --level v2.3 --count 600 /tmp/fuzzed.yaml
    .venv/bin/python -m trainer conformance --level v2.3 --nodes 0 /tmp/fuzzed.yaml

The runner sends its own well-formed envelope (the object and old object are the fuzzer's, the
operation and kinds too), so hostile envelopes, values of more than 30,000 characters of JSON,
nests deeper than 50 and NUL characters are left out (the runner's YAML and Go's JSON treat them
alike or not at all). TrainJobs naming the fuzzer's own runtimes (``FUZZ_RUNTIMES_V2_3``) are
left out too: the Go side holds only upstream's runtimes. ``FUZZ_SEED`` draws another sequence.
Found so far: docs/reliability.md ("Go check").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))

import admission_fuzz as af  # noqa: E402  (test/ on the path first)

MAX_TEXT = 30_000
MAX_DEPTH = 50
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max([_depth(v, level + 1) for v in value.values()], default=level)
    if isinstance(value, list):
        return max([_depth(v, level + 1) for v in value], default=level)
    return level


def _document(index: int, path: str, review: Any, own_runtimes: set[str]) -> dict[str, Any] | None:
    """The review as a ``WebhookRequest``, or None when the runner could not send it as it is."""
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or review.get("apiVersion") != "admission.k8s.io/v1":
        return None
    if request.get("operation") not in OPERATIONS:
        return None
    if not isinstance(request.get("kind"), dict) or not isinstance(request.get("resource"), dict):
        return None
    obj, old = request.get("object"), request.get("oldObject")
    text = json.dumps([obj, old])
    if len(text) > MAX_TEXT or _depth([obj, old]) > MAX_DEPTH or "\\u0000" in text:
        return None
    if any(f'"{name}"' in text for name in own_runtimes):
        return None
    return {
        "apiVersion": "conformance.trainer.kubeflow.org/v1alpha1",
        "kind": "WebhookRequest",
        "name": f"fz-{index}",
        "path": path,
        "operation": request["operation"],
        "requestKind": request["kind"],
        "resource": request["resource"],
        "object": obj,
        "oldObject": old,
    }


def write(level: af.FuzzLevel, count: int, out: Path) -> int:
    own_runtimes = {r["metadata"]["name"] for r in af.FUZZ_RUNTIMES_V2_3}
    docs: list[dict[str, Any]] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        derandomize=os.environ.get("FUZZ_SEED") is None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(af.admission_reviews(level, "default"))
    def collect(drawn: tuple[str, Any]) -> None:
        doc = _document(len(docs), drawn[0], drawn[1], own_runtimes)
        if doc is not None:
            docs.append(doc)

    if os.environ.get("FUZZ_SEED"):
        collect = seed(int(os.environ["FUZZ_SEED"]))(collect)
    collect()
    with out.open("w") as f:
        f.write(f"# levels: {level.name}\n")
        yaml.safe_dump_all(docs, f, allow_unicode=False, width=1 << 20)
    return len(docs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--level", choices=sorted(af.LEVELS), default="v2.3")
    parser.add_argument("--count", type=int, default=600, help="reviews drawn (some are left out)")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    written = write(af.LEVELS[args.level], args.count, args.out)
    print(f"{written} WebhookRequest documents in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
