"""``make test-chaos``: the full chaos run -- 500 TrainJobs on mixed runtimes plus
plain JobSets and PodGroups in flight, kube-apiserver SIGKILLed 5 times, etcd compacted with
every watch expired twice, the leader SIGKILLed twice, 45 s of proxy faults; then every object
in the state it must be in, no orphan, no duplicate, no event storm, the figures printed and
written to ``$CHAOS_OUT`` (default ``chaos-results/chaos.json``).

The reduced form runs in ``make test`` (test/e2e/chaos).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import ChaosRun, Params, check, write

pytestmark = pytest.mark.chaos


def params_from_env() -> Params:
    p = Params()
    for name, value in os.environ.items():
        if name.startswith("CHAOS_") and name != "CHAOS_OUT" and name != "CHAOS_SEED":
            attr = name.removeprefix("CHAOS_").lower()
            if isinstance(getattr(p, attr, None), int | float):
                setattr(p, attr, type(getattr(p, attr))(value))
    return p


async def test_chaos_full(tmp_path: Path) -> None:
    params = params_from_env()
    fig = await ChaosRun(params, tmp_path).run()
    out = Path(os.environ.get("CHAOS_OUT", "chaos-results/chaos.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    write(fig, out)
    print(fig.table())
    check(fig, params)
