"""``test/repeat.py`` (``make test-repeat``), the flake detector: it counts the runs that failed
and the tests that failed in them, and leaves no CPU hog behind, also when interrupted.

The real script runs in a subprocess on a tiny test file in ``tmp_path`` whose one test fails on
chosen runs (it reads ``TEST_REPEAT_RUN``, the run's number the script sets).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPEAT = ROOT / "test" / "repeat.py"

FLAKY = """
import os

def test_steady():
    pass

def test_flaky():
    assert os.environ["TEST_REPEAT_RUN"] not in ("2", "4"), "fails on runs 2 and 4"
"""


def hog_pids(output: str) -> list[int]:
    found = re.search(r"CPU hogs at nice \d+ \(pids ([\d, ]+)\)", output)
    assert found, output
    return [int(p) for p in found[1].split(", ")]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_counts_the_failed_runs_and_their_tests_and_stops_its_hogs(tmp_path: Path) -> None:
    (tmp_path / "test_flaky.py").write_text(FLAKY)
    done = subprocess.run(
        [sys.executable, str(REPEAT), "--runs", "5", "--hogs", "2", "--", "test_flaky.py", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "test-repeat: 2/5 runs failed (40%)" in out, out
    assert "test-repeat:   run 2: test_flaky.py::test_flaky\n" in out, out
    assert "test-repeat:   run 4: test_flaky.py::test_flaky\n" in out, out
    assert "run 1/5 passed" in out and "run 3/5 passed" in out and "run 5/5 passed" in out, out
    assert "test_flaky.py::test_flaky failed in 2/5 runs" in out, out
    assert "test_steady" not in out.split("runs failed")[1], out  # only the failing test is named
    pids = hog_pids(out)
    assert len(pids) == 2
    assert not [p for p in pids if alive(p)], "test-repeat left a CPU hog running"


def test_all_runs_passing_exits_zero(tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    done = subprocess.run(
        [sys.executable, str(REPEAT), "--runs", "2", "--hogs", "1", "test_ok.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test-repeat: 0/2 runs failed (0%)" in done.stdout


def test_ctrl_c_stops_the_run_and_the_hogs(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(120)\n")
    log = tmp_path / "repeat.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(REPEAT), "--runs", "3", "--hogs", "2", "test_slow.py"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    try:
        deadline = time.monotonic() + 60
        while "test_slow.py " not in log.read_text():  # pytest has started the slow test
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        pids = hog_pids(log.read_text())
        for pid in pids:  # busy at the lowest priority while the tests run
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            assert int(fields[16]) == 19, fields  # field 19 of stat: nice
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the script and its pytest run get it
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text()
    assert code == 130, output
    assert "test-repeat: interrupted by SIGINT during run 1" in output, output
    assert "test-repeat: 0/0 (of 3 planned) runs failed (0%)" in output, output
    assert not [p for p in pids if alive(p)], "test-repeat left a CPU hog running after Ctrl-C"
