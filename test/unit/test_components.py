from __future__ import annotations

import pytest

from trainer.components import Component, select


async def _setup(*_: object) -> bool:
    return True


ALL = (Component("trainer", "", _setup), Component("jobset", "", _setup), Component("scheduling", "", _setup))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("*", ["trainer", "jobset", "scheduling"]),
        ("*,-jobset", ["trainer", "scheduling"]),
        ("jobset", ["jobset"]),
        ("scheduling,trainer", ["trainer", "scheduling"]),
        ("", []),
    ],
)
def test_controllers_flag_follows_kube_controller_manager_syntax(spec: str, expected: list[str]) -> None:
    assert [c.name for c in select(spec, ALL)] == expected


def test_unknown_name_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="unknown controller 'jobsets'"):
        select("*,-jobsets", ALL)
