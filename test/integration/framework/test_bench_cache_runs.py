"""``make bench-framework``'s cache bench still runs against a real API server, small.

It wraps the informer's internals to time them, so a change to those internals can break it
without any other test noticing (it once failed every watch event and divided by zero).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("compact", [False, True])
def test_the_cache_bench_lists_watches_and_times_the_informer(compact: bool) -> None:
    argv = [sys.executable, str(ROOT / "test" / "bench" / "bench_cache.py"), "--pods", "200"]
    done = subprocess.run(
        argv + (["--compact"] if compact else []), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())
    assert int(figures["pods"]) == 200
    assert int(figures["watch_updates"]) == 40
    assert float(figures["informer_apply_capacity_per_second"]) > 0
    assert float(figures["initial_objects_per_second"]) > 0
    assert "failed" not in done.stderr, done.stderr[-3000:]
