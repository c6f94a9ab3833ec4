"""The ``trainer`` component: registration in COMPONENTS, skipping without CRDs, its cache indexes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import webhooks
from manager.cache import Cache
from manager.cache.store import field_index_name
from manager.client import Client, RestTransport
from manager.client.restmapper import NoKindMatch, RESTMapper, RESTMapping
from manager.config import RestConfig
from manager.scheme import GroupVersionKind
from trainer.components import COMPONENTS, component
from trainer.controllers import trainer_setup
from trainer.runtime import indexes
from trainer.runtime.context import SetupContext
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK
from trainer.runtime.registry import TRAINING_RUNTIME_KEY


class _Mapper:
    async def mapping(self, gvk: GroupVersionKind) -> Any:
        raise NoKindMatch(gvk)


def test_trainer_component_is_registered() -> None:
    [trainer] = [c for c in COMPONENTS if c.name == "trainer"]
    assert trainer.controllers is trainer_setup.setup
    assert trainer.webhooks is webhooks.setup_trainer
    assert component("trainer") is trainer


class _Untouchable:
    def register(self, path: str, handler: Any) -> None:
        raise AssertionError(f"a webhook was registered at {path} although the CRD is absent")


async def test_component_skips_itself_without_the_trainjob_crd() -> None:
    mgr: Any = SimpleNamespace(mapper=_Mapper())
    assert await trainer_setup.setup(SetupContext(mgr)) is False
    assert await component("trainer").setup(SetupContext(mgr, _Untouchable())) is False  # type: ignore[arg-type]


async def test_runtimes_register_their_indexes_on_the_cache_once() -> None:
    transport = RestTransport(RestConfig(host="http://127.0.0.1:9"))  # never contacted
    mapper = RESTMapper(transport)
    mapper.add(RESTMapping(TRAINJOB_GVK, "trainjobs", True))
    mapper.add(RESTMapping(TRAINING_RUNTIME_GVK, "trainingruntimes", True))
    mapper.add(RESTMapping(CLUSTER_TRAINING_RUNTIME_GVK, "clustertrainingruntimes", False))
    cache = Cache(Client(transport, mapper))
    context = SetupContext(SimpleNamespace(cache=cache, api_reader=cache, mapper=None))  # type: ignore[arg-type]
    try:
        runtimes = await context.runtimes()
        assert await context.runtimes() is runtimes
        for gvk, name in [
            (TRAINJOB_GVK, indexes.TRAINJOB_RUNTIME_REF_KEY),
            (TRAINJOB_GVK, indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY),
            (TRAINING_RUNTIME_GVK, indexes.TRAINING_RUNTIME_RUNTIME_CLASS_KEY),
            (CLUSTER_TRAINING_RUNTIME_GVK, indexes.CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY),
        ]:
            assert (await cache.get_informer(gvk)).store.has_index(field_index_name(name)), name
        # the webhooks' runtimes register nothing again (the store rejects a repeated index name)
        admission = await context.admission_runtimes()
        assert admission.keys() == runtimes.keys()
        assert admission[TRAINING_RUNTIME_KEY] is not runtimes[TRAINING_RUNTIME_KEY]
    finally:
        await transport.aclose()
