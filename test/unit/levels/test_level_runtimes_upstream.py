"""`config/overlays/v2.3/runtimes` against the ClusterTrainingRuntimes Trainer v2.3.0 ships (its
Go module's `manifests/base/runtimes`, as `manifests/overlays/runtimes` releases them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from test_level_manifests import ROOT, key, rendered
from test_level_manifests_upstream import LEVEL, upstream, upstream_rendered

from trainer import install

Json = dict[str, Any]
OURS = ROOT / "config" / LEVEL.runtimes


def _by_key(docs: list[Json]) -> dict[tuple[str, str, str], Json]:
    return {key(d): d for d in docs}


def test_the_v2_3_runtimes_are_the_ones_trainer_v2_3_0_releases_field_for_field() -> None:
    theirs = _by_key(upstream_rendered("manifests/overlays/runtimes"))
    ours = _by_key(install.render(OURS))
    assert sorted(ours) == sorted(theirs)
    for k, doc in theirs.items():
        assert ours[k] == doc, f"{k[2]} differs from upstream v2.3.0's"
    # kustomize renders ours as the built-in reader does
    assert _by_key(rendered(OURS)) == ours


def test_every_runtime_file_upstream_ships_in_base_has_its_counterpart() -> None:
    """Each ClusterTrainingRuntime of `manifests/base/runtimes` (the data cache's overlay aside,
    as at v2.1) is shipped, with its spec unchanged but the release's image tags."""
    base = upstream() / "manifests" / "base" / "runtimes"
    ours = _by_key(install.render(OURS))
    files = [
        p
        for p in sorted(base.rglob("*.yaml"))
        if p.name != "kustomization.yaml" and "data-cache" not in p.parts
    ]
    assert len(files) == len(ours)
    for path in files:
        doc = yaml.safe_load(path.read_text())
        mine = ours[key(doc)]
        assert mine["metadata"]["labels"] == {
            **doc["metadata"]["labels"],
            "trainer.kubeflow.org/webhook-validation": "disabled",
        }
        assert _untagged(mine["spec"]) == _untagged(doc["spec"]), path.name
        assert (OURS / f"{doc['metadata']['name']}.yaml").is_file()


def _untagged(value: Any) -> Any:
    """``value`` with the Kubeflow images' release tag dropped (what the overlay's `images:` adds)."""
    if isinstance(value, dict):
        return {
            k: _strip_tag(v) if k == "image" and isinstance(v, str) else _untagged(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_untagged(v) for v in value]
    return value


def _strip_tag(image: str) -> str:
    if image.startswith("ghcr.io/kubeflow/trainer/"):
        return image.removesuffix(f":{LEVEL.trainer_version}")
    return image


def test_the_shipped_runtimes_directory_lists_only_its_files() -> None:
    listed = yaml.safe_load((OURS / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(
        p.name for p in Path(OURS).glob("*.yaml") if p.name != "kustomization.yaml"
    )
