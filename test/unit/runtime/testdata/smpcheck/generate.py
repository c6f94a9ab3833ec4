"""Regenerate ``smp_golden.json``: random override cases merged by apimachinery's strategicpatch.

Run from the project root with Go and the k8s.io module cache available:
``cd test/unit/runtime/testdata/smpcheck && go build -o /tmp/smp . && cd - && python3 test/unit/runtime/testdata/smpcheck/generate.py /tmp/smp``
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "smp_golden.json"


def cases(seed: int = 7, count: int = 40) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rng = random.Random(seed)
    names = list("ABCDEFGH")
    out = []
    for _ in range(count):
        original = rng.sample(names, rng.randint(0, 6))
        patch = rng.sample(names, rng.randint(1, 5))
        out.append(
            (
                {
                    "spec": {
                        "containers": [{"name": "c", "env": [{"name": n, "value": "o"} for n in original]}]
                    }
                },
                {"spec": {"containers": [{"name": "c", "env": [{"name": n, "value": "p"} for n in patch]}]}},
            )
        )
        out.append(
            (
                {"spec": {"volumes": [{"name": n, "emptyDir": {}} for n in original]}},
                {"spec": {"volumes": [{"name": n, "secret": {"secretName": n}} for n in patch]}},
            )
        )
    return out


def main(binary: str) -> None:
    items = cases()
    stdin = "".join(json.dumps({"original": o, "patch": p}) + "\n" for o, p in items)
    lines = subprocess.run(
        [binary], input=stdin, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    golden = [
        {"original": o, "patch": p, "merged": json.loads(line)}
        for (o, p), line in zip(items, lines, strict=True)
    ]
    OUT.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
