"""Third-party runtime plugins, found through the ``trainer.runtime.plugins`` entry-point group.

A package that declares ``[project.entry-points."trainer.runtime.plugins"] Name = "mod:Factory"``
is discovered at start-up; ``Factory(PluginContext)`` builds the plugin (a class with ``name``
and the methods of the extension points it implements, see ``plugins/base.py`` and
``docs/plugins.md``). Discovery alone runs nothing: a plugin joins the framework only when the
Configuration names it in ``runtimePlugins``, and the list's order is the order it runs in,
after the built-in plugins and before JobSet (so the objects it builds are applied before the
JobSet whose pods may need them).

Why the Configuration and not a runtime's ML policy: upstream's plugins are all registered in
the binary and each acts only on the runtimes whose policy asks for it; a third-party plugin
does the same (it decides from the Info, the runtime's labels or annotations whether it has
work), and the cluster administrator decides once, in the manager's Configuration, which
installed code the manager may run.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

GROUP = "trainer.runtime.plugins"
log = structlog.get_logger("trainer.runtime.plugins")

__all__ = ["GROUP", "Discovered", "PluginConfigError", "configure", "discover", "enabled_factories"]


class PluginConfigError(ValueError):
    """``runtimePlugins`` names a plugin no installed package provides, or one that will not load."""


@dataclass(frozen=True)
class Discovered:
    name: str
    value: str  # "module:attr"
    distribution: str
    load: Callable[[], Any]


def discover() -> dict[str, Discovered]:
    """Every entry point of the group, by name (the first package wins a duplicated name)."""
    found: dict[str, Discovered] = {}
    for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else "?"
        if ep.name in found:
            log.warning("duplicate runtime plugin name ignored", plugin=ep.name, distribution=dist)
            continue
        found[ep.name] = Discovered(ep.name, ep.value, dist, ep.load)
    return found


_enabled: list[tuple[str, Callable[[Any], Any]]] = []


def configure(names: Sequence[str], builtin: Sequence[str] = (), *, report: bool = True) -> list[str]:
    """Load the plugins ``names`` enables, in that order; log what was found and what runs
    (unless not ``report``: the webhook process loads them too, the manager says it once).

    Raises ``PluginConfigError`` naming the ``runtimePlugins`` entry that cannot be honoured.
    Returns the enabled names.
    """
    discovered = discover()
    loaded: list[tuple[str, Callable[[Any], Any]]] = []
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in builtin:
            raise PluginConfigError(f'runtimePlugins[{i}]: Invalid value: "{name}": a built-in plugin')
        if name in seen:
            raise PluginConfigError(f'runtimePlugins[{i}]: Duplicate value: "{name}"')
        seen.add(name)
        if name not in discovered:
            known = ", ".join(sorted(discovered)) or "none"
            raise PluginConfigError(
                f'runtimePlugins[{i}]: Not found: "{name}": no installed package declares it in the '
                f"entry-point group {GROUP} (found: {known})"
            )
        try:
            factory = discovered[name].load()
        except Exception as err:  # an import error of third-party code names the plugin
            raise PluginConfigError(
                f'runtimePlugins[{i}]: Invalid value: "{name}": cannot load: {err!r}'
            ) from err
        if not callable(factory):
            raise PluginConfigError(
                f'runtimePlugins[{i}]: Invalid value: "{name}": {discovered[name].value} is not callable'
            )
        loaded.append((name, factory))
    _enabled[:] = loaded
    if report:
        log.info(
            "runtime plugins",
            builtin=list(builtin),
            discovered={n: f"{d.distribution} ({d.value})" for n, d in discovered.items()},
            enabled=[n for n, _ in loaded],
        )
    return [n for n, _ in loaded]


def enabled_factories() -> list[tuple[str, Callable[[Any], Any]]]:
    """The enabled third-party plugins' factories, in their configured order."""
    return list(_enabled)


def reset() -> None:
    _enabled.clear()
