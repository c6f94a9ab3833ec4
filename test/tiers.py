"""``make test``: the unit and integration tiers in one pytest process, the e2e tier in another,
side by side.

    python test/tiers.py -m "not kueue_full and not realnode" [pytest arguments ...]

The e2e tier spends much of its time waiting on local clusters (controllers, KWOK pods that run
for seconds, managers starting), and the unit tier is one busy core: run one after the other they
leave a core idle most of the time. Each process keeps its own session fixtures (the integration
tier's API server, the e2e tier's cluster) and every test in it runs as before, one at a time;
the two processes share nothing but the machine (ports are reserved across processes,
``manager.envtest.process.free_port``; builds and caches hold file locks).

The first process's output streams as it runs; the e2e tier's is kept in a file and printed
after it, then its summary. The exit code is the worse of the two (pytest's "no tests collected",
5, counts as success for a tier that a ``-k`` or ``-m`` left empty). SIGINT and SIGTERM reach
both processes; both die with this one (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NO_TESTS = 5
SHARDS = (("unit and integration tiers", "(unit or integration)"), ("e2e tier", "e2e"))


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def shard_command(tiers: str, marker: str, pytest_args: list[str]) -> list[str]:
    expression = f"{tiers} and ({marker})" if marker else tiers
    return [sys.executable, "-m", "pytest", "test", "-m", expression, *pytest_args]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-m", dest="marker", default="", help="a marker expression every tier must match")
    args, pytest_args = parser.parse_known_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="test-tiers-") as tmp:
        e2e_log = Path(tmp) / "e2e.log"
        (first_name, first_tiers), (second_name, second_tiers) = SHARDS
        with e2e_log.open("wb") as sink:
            second = subprocess.Popen(
                shard_command(second_tiers, args.marker, pytest_args),
                cwd=ROOT,
                stdout=sink,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        first = subprocess.Popen(
            shard_command(first_tiers, args.marker, pytest_args), cwd=ROOT, preexec_fn=_die_with_parent
        )

        def forward(signum: int, _frame: object) -> None:
            for proc in (first, second):
                if proc.poll() is None:
                    proc.send_signal(signum)

        signal.signal(signal.SIGINT, forward)
        signal.signal(signal.SIGTERM, forward)
        first_code = first.wait()
        first_done = time.monotonic() - started
        print(
            f"\ntiers: the {first_name} ended ({first_code}) after {first_done:.0f}s; the {second_name}:",
            flush=True,
        )
        second_code = second.wait()
        sys.stdout.write(e2e_log.read_text(errors="replace"))
        print(
            f"tiers: the {second_name} ended ({second_code}) after {time.monotonic() - started:.0f}s",
            flush=True,
        )
    return merged_exit(first_code, second_code)


def merged_exit(*codes: int) -> int:
    """The worse of the tiers' exit codes: a tier left empty by ``-k``/``-m`` (pytest's 5) passed,
    one killed by a signal ends as a shell reports it (128 + the signal)."""
    return max(0 if code == NO_TESTS else 128 - code if code < 0 else code for code in codes)


if __name__ == "__main__":
    sys.exit(main())
