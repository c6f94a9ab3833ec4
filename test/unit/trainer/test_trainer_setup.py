"""The ``trainer`` component: registration in COMPONENTS, skipping without CRDs, deferred indexes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from manager.client.restmapper import NoKindMatch
from manager.scheme import GroupVersionKind
from trainer.components import COMPONENTS
from trainer.controllers import trainer_setup
from trainer.controllers.trainer_setup import DeferredIndexer
from trainer.runtime import indexes


class _Mapper:
    async def mapping(self, gvk: GroupVersionKind) -> Any:
        raise NoKindMatch(gvk)


def test_trainer_component_is_registered() -> None:
    [component] = [c for c in COMPONENTS if c.name == "trainer"]
    assert component.setup is trainer_setup.setup


async def test_component_skips_itself_without_the_trainjob_crd() -> None:
    mgr: Any = SimpleNamespace(client=SimpleNamespace(mapper=_Mapper()))
    assert await trainer_setup.setup(mgr, None) is False


class _Cache:
    def __init__(self) -> None:
        self.indexes: dict[str, Any] = {}

    async def index_field(self, gvk: GroupVersionKind, name: str, fn: Any) -> None:
        self.indexes[name] = fn


async def test_deferred_indexes_reach_the_cache_and_never_yield_none() -> None:
    deferred = DeferredIndexer()
    with pytest.raises(ValueError, match="field name cannot be empty"):
        deferred.index_field(GroupVersionKind("g", "v", "K"), "", lambda o: None)
    deferred.index_field(
        GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
        indexes.TRAINJOB_RUNTIME_REF_KEY,
        indexes.index_trainjob_training_runtime,
    )
    cache = _Cache()
    await deferred.apply(cache)
    fn = cache.indexes[indexes.TRAINJOB_RUNTIME_REF_KEY]
    assert list(fn({"kind": "Other"})) == []
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "spec": {"runtimeRef": {"name": "r", "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"}},
    }
    assert list(fn(tj)) == ["r"]
