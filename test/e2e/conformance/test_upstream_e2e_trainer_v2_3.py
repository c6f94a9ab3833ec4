"""Upstream's own trainer v2.3.0 e2e suite (``test/e2e``) against this manager at API level v2.3.

A second judge no one here wrote: the suite, compiled with ``go test -c`` from the Go module
proxy (cached), runs unchanged on a full local cluster (KWOK nodes) served by ``python -m trainer
--api-level=v2.3`` with the TrainJobStatus gate and the flux-distributed runtime, as upstream's
``hack/e2e-setup-cluster.sh`` prepares its cluster. Its PyTorch, DeepSpeed, JAX, XGBoost and
Flux specs (jobsStatus while the Jobs are active, then Complete), the RuntimePatches ``time``
stamping of the defaulting webhook, the ``managedBy`` TrainJob left alone, and the runtime
snapshot of a suspended TrainJob (both runtime kinds) run here. Two specs need a container that
really runs, which KWOK does not, and are left out (they fail against the Go managers too,
docs/conformance.md): the DeadlineExceeded spec (its ``sleep 600`` pod succeeds after the pod
run time) and the status-server spec (its Python script must POST to the endpoint). About 2.5
min; the whole suite, the jobset v0.12.0 suite and the Go side run with
``make test-upstream-e2e LEVEL=v2.3``.
"""

from __future__ import annotations

import pytest

from trainer.conformance.upstream_e2e import main

#: The specs no KWOK cluster can pass, on either side (docs/conformance.md, "At API level v2.3").
NEEDS_A_RUNNING_CONTAINER = "DeadlineExceeded|runtime status endpoint"


def test_upstream_trainer_v2_3_e2e_suite_passes_against_this_manager(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--level", "v2.3", "--sides", "ours", "--suites", "trainer", "--nodes", "2"]
    code = main([*args, "--skip", NEEDS_A_RUNNING_CONTAINER])
    captured = capsys.readouterr()
    out = captured.out
    print(out)
    # no report: the run stopped before the suite; why is on stderr
    assert "trainer e2e v2.3.0 against ours (this manager): 10/10 passed" in out, out + captured.err[-4000:]
    assert code == 0, out
