"""A flake detector: run the given tests N times under a CPU hog, count the runs that failed.

    python test/repeat.py --runs 20 test/unit/test_x.py::test_y test/integration/test_z.py
    make test-repeat TESTS="test/unit/test_x.py::test_y" N=20

Every run is one ``python -m pytest`` of the given test ids (any pytest argument may follow them;
``--`` ends this script's own options), the environment variable ``TEST_REPEAT_RUN`` set to the
run's number (1..N). Meanwhile ``--hogs`` busy-loop processes (default: one per CPU, ``nproc``)
keep every core busy at low priority (``nice`` 19 by default): the tests still get the CPU they
ask for, but never an idle machine, which is where timing assumptions break. The hogs run in
their own session and are always killed at the end, also after Ctrl-C or SIGTERM (and die with
this process if it is killed: ``PR_SET_PDEATHSIG``).

At the end: ``test-repeat: F/N runs failed (P%)``, then each failed run's number and the ids of
the tests that failed in it (a run that failed without a failing test, e.g. a collection error,
names its pytest exit code), and how often each test failed. Exit 0 when every run passed, 1
when one failed, 130/143 when interrupted (the runs so far are still counted).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAILURES_ENV = "TEST_REPEAT_FAILURES"
RUN_ENV = "TEST_REPEAT_RUN"
_PR_SET_PDEATHSIG = 1
HOG = "while True: pass"


# -- the pytest plugin (loaded into each run with -p repeat) ------------------------------------


def pytest_runtest_logreport(report: object) -> None:
    """Append the id of every failed test (setup, call or teardown) to $TEST_REPEAT_FAILURES."""
    path = os.environ.get(FAILURES_ENV)
    if path and getattr(report, "failed", False):
        with open(path, "a") as out:
            out.write(f"{getattr(report, 'nodeid', '?')}\n")


def pytest_collectreport(report: object) -> None:
    """A file that does not even import is a failure too."""
    pytest_runtest_logreport(report)


# -- the hogs ------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _hog_preexec(nice: int) -> None:
    _die_with_parent()
    os.nice(nice)


@contextlib.contextmanager
def cpu_hogs(count: int, nice: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy-loop processes at ``nice``; killed (and reaped) when the block ends."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            hogs.append(
                subprocess.Popen(
                    [sys.executable, "-c", HOG],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C is not theirs: they are killed here
                    preexec_fn=lambda: _hog_preexec(nice),
                )
            )
        yield hogs
    finally:
        for hog in hogs:
            with contextlib.suppress(ProcessLookupError):
                hog.kill()
        for hog in hogs:
            hog.wait()


# -- the runs ------------------------------------------------------------------------------------


@dataclass
class Run:
    number: int
    code: int
    seconds: float
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code == 0

    def what_failed(self) -> str:
        if self.failed:
            return ", ".join(dict.fromkeys(self.failed))
        return f"pytest exit code {self.code} (no test failed: collection or usage error?)"


class Stop(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def run_once(number: int, pytest_args: list[str], workdir: Path) -> Run:
    failures = workdir / f"run-{number}.failed"
    env = {
        **os.environ,
        RUN_ENV: str(number),
        FAILURES_ENV: str(failures),
        # this file is the plugin ``-p repeat``: its directory goes first on the path
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    argv = [sys.executable, "-m", "pytest", "-p", "repeat", "-p", "no:cacheprovider", *pytest_args]
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=os.getcwd())
    try:
        code = proc.wait()
    except BaseException:  # stopped: the run does not outlive this process
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise
    failed = failures.read_text().splitlines() if failures.exists() else []
    return Run(number, code, time.monotonic() - started, failed)


def summary(runs: list[Run], planned: int) -> list[str]:
    failed = [r for r in runs if not r.ok]
    rate = 100.0 * len(failed) / len(runs) if runs else 0.0
    of = f"{len(runs)}" if len(runs) == planned else f"{len(runs)} (of {planned} planned)"
    lines = [f"test-repeat: {len(failed)}/{of} runs failed ({rate:.0f}%)"]
    for run in failed:
        lines.append(f"test-repeat:   run {run.number}: {run.what_failed()}")
    counts = Counter(test for run in failed for test in dict.fromkeys(run.failed))
    for test, n in counts.most_common():
        lines.append(f"test-repeat:   {test} failed in {n}/{len(runs)} runs")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="test/repeat.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("-n", "--runs", type=int, default=10, help="how many runs (default 10)")
    p.add_argument(
        "--hogs", type=int, default=os.cpu_count() or 1, help="busy-loop processes (default: one per CPU)"
    )
    p.add_argument("--nice", type=int, default=19, help="the hogs' nice value (default 19, the lowest)")
    p.add_argument("tests", nargs=argparse.REMAINDER, help="pytest ids, then any pytest arguments")
    args = p.parse_args(argv)
    args.tests = [t for t in args.tests if t != "--"] if args.tests[:1] == ["--"] else args.tests
    if not args.tests:
        p.error("name the tests to repeat (pytest ids, e.g. test/unit/test_x.py::test_y)")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def stop(signum: int, _frame: object) -> None:
        raise Stop(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    runs: list[Run] = []
    code = 0
    with tempfile.TemporaryDirectory(prefix="test-repeat-") as tmp:
        try:
            with cpu_hogs(args.hogs, args.nice) as hogs:
                pids = ", ".join(str(h.pid) for h in hogs)
                print(
                    f"test-repeat: {args.runs} runs of {' '.join(args.tests)} with {len(hogs)} CPU hogs "
                    f"at nice {args.nice} (pids {pids})",
                    flush=True,
                )
                for number in range(1, args.runs + 1):
                    run = run_once(number, args.tests, Path(tmp))
                    runs.append(run)
                    state = "passed" if run.ok else f"FAILED: {run.what_failed()}"
                    print(f"test-repeat: run {number}/{args.runs} {state} ({run.seconds:.1f}s)", flush=True)
        except (KeyboardInterrupt, Stop) as err:
            signum = err.signum if isinstance(err, Stop) else signal.SIGINT
            print(
                f"test-repeat: interrupted by {signal.Signals(signum).name} during run {len(runs) + 1}; "
                "the CPU hogs are stopped",
                flush=True,
            )
            code = 128 + signum
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    for line in summary(runs, args.runs):
        print(line, flush=True)
    if code:
        return code
    return 1 if any(not r.ok for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
