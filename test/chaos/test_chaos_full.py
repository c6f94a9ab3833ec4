"""``make test-chaos``: the full chaos run at each API level (``[v2_1]``, ``[v2_3]``; one cluster
per level) -- 500 TrainJobs on mixed runtimes plus plain JobSets and PodGroups in flight,
kube-apiserver SIGKILLed 5 times, etcd compacted with every watch expired twice, the leader
SIGKILLed twice, 45 s of proxy faults; then every object in the state it must be in, no orphan,
no duplicate, no event storm, the figures printed and written to ``$CHAOS_OUT`` (default
``chaos-results/chaos.json``; the level's id is put before the suffix: ``chaos-v2_3.json``).
``CHAOS_LEVELS=v2.3`` (or ``-k v2_3``) runs one level.

The reduced form runs in ``make test`` (test/e2e/chaos).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import CHAOS_LEVELS, Params, level_id, run_and_check

pytestmark = pytest.mark.chaos


def params_from_env(level: str) -> Params:
    p = Params(level=level)
    for name, value in os.environ.items():
        if name.startswith("CHAOS_") and name not in ("CHAOS_OUT", "CHAOS_SEED", "CHAOS_LEVELS"):
            attr = name.removeprefix("CHAOS_").lower()
            if isinstance(getattr(p, attr, None), int | float):
                setattr(p, attr, type(getattr(p, attr))(value))
    return p


@pytest.mark.parametrize("level", CHAOS_LEVELS, ids=[level_id(n) for n in CHAOS_LEVELS])
async def test_chaos_full(level: str, tmp_path: Path) -> None:
    out = Path(os.environ.get("CHAOS_OUT", "chaos-results/chaos.json"))
    await run_and_check(params_from_env(level), tmp_path, out.with_stem(f"{out.stem}-{level_id(level)}"))
