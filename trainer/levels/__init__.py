"""API levels: which upstream line the manager speaks (docs/levels.md).

A level is one upstream release line as a whole: its Trainer and JobSet versions, the API
models its CRDs are generated from, the manifests it installs and the Go originals it is
compared against. What differs between lines is reached through the ``ApiLevel`` the
Configuration selects (``apiLevel``), never by comparing level names: a behaviour that belongs
to one line lives in that line's module (``trainer/levels/v2_1.py``, ``trainer/levels/v2_3.py``)
and reaches the shared code as a value of the level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.api import config_constants
from trainer.levels.level import ApiLevel, CrdLevelMismatch
from trainer.levels.v2_1 import V2_1
from trainer.levels.v2_3 import V2_3

__all__ = ["DEFAULT", "LEVELS", "ApiLevel", "CrdLevelMismatch", "get", "of_trainjob_crd"]

LEVELS: dict[str, ApiLevel] = {level.name: level for level in (V2_1, V2_3)}
DEFAULT: ApiLevel = LEVELS[config_constants.DefaultApiLevel]
"""The level of a Configuration without ``apiLevel``."""


def get(name: str | None) -> ApiLevel:
    """The level named ``name`` (the default when empty); the Configuration validated the name."""
    if not name:
        return DEFAULT
    if name not in LEVELS:
        raise ValueError(f"no API level {name!r} (levels: {', '.join(LEVELS)})")
    return LEVELS[name]


def of_trainjob_crd(crd: Mapping[str, Any]) -> ApiLevel | None:
    """The level whose TrainJob CRD this is, from the fields only that level's schema has."""
    for level in LEVELS.values():
        if level.owns_trainjob_crd(crd):
            return level
    return None
