"""`make test` runs two pytest processes side by side (test/tiers.py): what each selects and how
their exit codes combine."""

from __future__ import annotations

import sys

import tiers


def test_each_tier_process_selects_its_tiers_within_the_common_marker() -> None:
    (_, first), (_, second) = tiers.SHARDS
    assert tiers.shard_command(first, "not slow", ["-x"]) == [
        sys.executable,
        "-m",
        "pytest",
        "test",
        "-m",
        "(unit or integration) and (not slow)",
        "-x",
    ]
    assert tiers.shard_command(second, "", [])[-2:] == ["-m", "e2e"]


def test_the_worse_exit_code_wins_and_an_empty_tier_passes() -> None:
    assert tiers.merged_exit(0, 0) == 0
    assert tiers.merged_exit(0, 1) == 1
    assert tiers.merged_exit(5, 0) == 0  # a -k that leaves the e2e tier empty
    assert tiers.merged_exit(5, 5) == 0
    assert tiers.merged_exit(2, 1) == 2
    assert tiers.merged_exit(-15, 0) == 143  # SIGTERM
