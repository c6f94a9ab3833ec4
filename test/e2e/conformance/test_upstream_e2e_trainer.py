"""Upstream's own trainer v2.1.0 e2e suite (``test/e2e``, 2 specs) against this manager.

A second judge no one here wrote: the suite, compiled with ``go test -c`` from the Go module
proxy (cached), runs unchanged on a full local cluster (KWOK nodes) served by ``python -m
trainer``, under the KWOK pod timing with which the Go managers pass it too (pods Pending a few
seconds, probed pods Ready after their initial delay, Job pods succeeding seconds after). It
checks the TrainJob's jobsStatus while its Jobs are active and its Complete condition after, on
the torch-distributed and deepspeed-distributed runtimes. About 70 s; the jobset suite (10
specs, about 3.5 min) and the Go side run with ``make test-upstream-e2e``.
"""

from __future__ import annotations

import pytest

from trainer.conformance.upstream_e2e import main


def test_upstream_trainer_e2e_suite_passes_against_this_manager(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--level", "v2.1", "--sides", "ours", "--suites", "trainer", "--nodes", "2"])
    out = capsys.readouterr().out
    print(out)
    assert "trainer e2e v2.1.0 against ours (this manager): 2/2 passed" in out, out
    assert code == 0, out
