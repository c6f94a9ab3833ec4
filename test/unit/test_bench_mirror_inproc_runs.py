"""``make bench-framework``'s in-process mirror still runs, small.

It stands in for the API server at the REST transport's surface (``manager.cluster`` builds the
transport it patches), so a change to that surface, to the reflector's watch-list or to the
controller's start could break it without any other test noticing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("flags", [[], ["--first-pass-only"]], ids=["both-passes", "first-pass-only"])
def test_the_in_process_mirror_mirrors_every_object_and_reports_its_cpu(flags: list[str]) -> None:
    argv = [
        sys.executable,
        str(ROOT / "test" / "bench" / "bench_mirror_inproc.py"),
        "--n",
        "300",
        "--rounds",
        "2",
        *flags,
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = re.findall(r"^round \d: +([\d.]+) us of CPU per mirrored object$", done.stdout, re.M)
    assert len(rounds) == 2, done.stdout
    median = re.search(
        r"^median: ([\d.]+) us of CPU per mirrored object \(300 per round\)$", done.stdout, re.M
    )
    assert median is not None, done.stdout
    # a round ends only once each of the 300 was mirrored and reconciled twice (once with
    # --first-pass-only); a figure of zero or an absurd one means the clock or the count broke
    assert all(1.0 < float(us) < 100_000.0 for us in rounds), rounds
