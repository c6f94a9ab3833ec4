"""Third-party runtime plugins: discovery, configuration errors, order, isolation of failures."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from typing import Any

import pytest

from trainer.levels import get as api_level
from trainer.runtime.errors import PluginFailure
from trainer.runtime.framework import Framework
from trainer.runtime.plugins import BUILTIN, builtin_names, external, new_registry
from trainer.runtime.plugins.base import PluginContext


class Builds:
    name = "Builds"

    def __init__(self, context: PluginContext) -> None:
        self.context = context

    async def build(self, info: Any, trainjob: Any) -> list[dict[str, Any]]:
        return [{"kind": "ConfigMap", "metadata": {"name": "from-builds"}}]


class Raises:
    name = "Raises"

    def __init__(self, context: PluginContext) -> None:
        pass

    async def build(self, info: Any, trainjob: Any) -> list[dict[str, Any]]:
        raise RuntimeError("boom")

    def enforce_ml_policy(self, info: Any, trainjob: Any) -> None:
        raise LookupError("no such thing")

    async def validate(self, info: Any, old: Any, new: Any) -> Any:
        raise RuntimeError("validator crashed")


def _cannot_build(context: PluginContext) -> Any:
    raise OSError("no config file")


class _EP:
    def __init__(self, name: str, obj: Any, dist: str = "example-dist") -> None:
        self.name, self.value, self._obj = name, f"example:{name}", obj
        self.dist = type("D", (), {"name": dist})()

    def load(self) -> Any:
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_EP]]:
    eps: list[_EP] = []
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group: [e for e in eps if group == external.GROUP]
    )
    yield eps
    external.reset()


async def test_enabled_plugins_join_in_configured_order_before_jobset(entry_points: list[_EP]) -> None:
    entry_points += [_EP("Raises", Raises), _EP("Builds", Builds), _EP("Unused", Builds)]
    assert external.configure(["Builds", "Raises"], BUILTIN) == ["Builds", "Raises"]
    assert list(new_registry())[-3:] == ["Builds", "Raises", "JobSet"]
    framework = await Framework.new(object(), new_registry(), None)  # type: ignore[arg-type]
    assert framework.external == {"Builds", "Raises"}
    assert [p.name for p in framework.component_builder_plugins][-3:] == ["Builds", "Raises", "JobSet"]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["Missing"],
            'runtimePlugins[0]: Not found: "Missing": no installed package declares it in the entry-point group trainer.runtime.plugins (found: Broken, Builds)',
        ),
        (["Builds", "Builds"], 'runtimePlugins[1]: Duplicate value: "Builds"'),
        (["JobSet"], 'runtimePlugins[0]: Invalid value: "JobSet": a built-in plugin'),
        (["Broken"], "runtimePlugins[0]: Invalid value: \"Broken\": cannot load: ImportError('no module')"),
    ],
)
def test_bad_configuration_names_the_entry(entry_points: list[_EP], names: list[str], message: str) -> None:
    entry_points += [_EP("Builds", Builds), _EP("Broken", ImportError("no module"))]
    with pytest.raises(external.PluginConfigError) as err:
        external.configure(names, BUILTIN)
    assert str(err.value) == message


@pytest.mark.parametrize("name", ["JAX", "XGBoost"])
def test_a_level_plugin_name_is_built_in_at_its_level_only(entry_points: list[_EP], name: str) -> None:
    """At v2.3 the JAX and XGBoost plugins are built in: an installed plugin of that name is
    refused there as it would replace them, and enabled at v2.1, which has no such plugin."""
    entry_points.append(_EP(name, Builds))
    with pytest.raises(external.PluginConfigError) as err:
        external.configure([name], builtin_names(api_level("v2.3").runtime))
    assert str(err.value) == f'runtimePlugins[0]: Invalid value: "{name}": a built-in plugin'
    assert external.configure([name], builtin_names(api_level("v2.1").runtime)) == [name]


def test_nothing_is_enabled_by_discovery_alone(entry_points: list[_EP]) -> None:
    entry_points.append(_EP("Builds", Builds))
    assert external.configure([], BUILTIN) == []
    assert "Builds" not in new_registry()


async def test_a_raising_plugin_is_a_plugin_failure_naming_it(entry_points: list[_EP]) -> None:
    entry_points += [_EP("Raises", Raises), _EP("CannotBuild", _cannot_build)]
    external.configure(["Raises", "CannotBuild"], BUILTIN)
    framework = await Framework.new(object(), {"Raises": Raises, "CannotBuild": _cannot_build}, None)  # type: ignore[arg-type]
    assert framework.external == {"Raises"}  # the one that cannot be built is left out, logged
    with pytest.raises(PluginFailure) as err:
        await framework.run_component_builder_plugins(None, None)
    assert (err.value.plugin, err.value.message) == (
        "Raises",
        "runtime plugin Raises failed: RuntimeError: boom",
    )
    with pytest.raises(PluginFailure, match="runtime plugin Raises failed: LookupError: no such thing"):
        framework.run_enforce_ml_policy_plugins(None, None)
    warnings, errors = await framework.run_custom_validation_plugins(None, None, None)  # type: ignore[arg-type]
    assert warnings == [] and [e.detail for e in errors] == ["plugin Raises: validator crashed"]


async def test_built_in_plugins_keep_their_error_contract() -> None:
    framework = await Framework.new(object(), {"Raises": Raises}, None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="boom"):  # a bug in our own code is not hidden
        await framework.run_component_builder_plugins(None, None)
