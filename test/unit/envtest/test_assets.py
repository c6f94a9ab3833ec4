"""Binary lookup follows envtest's precedence, and a failed build is loud."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from manager.envtest import assets
from manager.envtest.errors import AssetBuildError


def make_binary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_lookup_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVTEST_ASSETS_DIR", str(cache))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("TEST_ASSET_KUBE_APISERVER", raising=False)
    assert assets.find("kube-apiserver") is None

    cached = make_binary(cache / "kube-apiserver")
    assert assets.find("kube-apiserver") == cached

    kb = make_binary(tmp_path / "kb" / "kube-apiserver")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(kb.parent))
    assert assets.find("kube-apiserver") == kb

    explicit = make_binary(tmp_path / "explicit" / "my-apiserver")
    monkeypatch.setenv("TEST_ASSET_KUBE_APISERVER", str(explicit))
    assert assets.find("kube-apiserver") == explicit


def test_cache_dir_is_keyed_by_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVTEST_ASSETS_DIR", raising=False)
    name = assets.assets_dir().name
    assert assets.K8S_VERSION in name and assets.ETCD_VERSION in name and assets.KWOK_VERSION in name


def test_ensure_rejects_unknown_binary() -> None:
    with pytest.raises(ValueError, match="cloud-controller-manager"):
        assets.ensure(["cloud-controller-manager"])


def test_the_node_binaries_are_their_own_piece_outside_the_control_planes() -> None:
    assert {assets.PIECES[b] for b in assets.NODE} == {"node"}
    assert not set(assets.NODE) & (set(assets.FULL) | set(assets.PLAIN))


def test_failed_build_names_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVTEST_ASSETS_DIR", str(tmp_path / "cache"))
    with pytest.raises(AssetBuildError) as err:
        assets.build(["no-such-piece"], quiet=True)
    assert "unknown piece 'no-such-piece'" in err.value.step


def test_missing_go_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AssetBuildError, match="go toolchain"):
        assets.build(["etcd"], quiet=True)
    assert os.environ["PATH"] == str(tmp_path)


def test_manifest_loading_skips_kustomization_files(tmp_path: Path) -> None:
    from manager.envtest.environment import _load_documents

    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n"
    )
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n")
    assert [d["kind"] for d in _load_documents([tmp_path])] == ["ConfigMap"]


def test_helm_is_an_asset_outside_the_control_plane_sets() -> None:
    assert assets.PIECES["helm"] == "helm"
    assert "helm" not in assets.FULL and "helm" not in assets.PLAIN


def test_cached_helm_counts_only_with_the_pinned_version_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVTEST_ASSETS_DIR", str(cache))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("TEST_ASSET_HELM", raising=False)
    monkeypatch.setattr(assets, "HELM_VERSION", "v3.22.0")
    helm = make_binary(cache / "helm")
    assert assets.find("helm") is None, "a helm without a version stamp is rebuilt"
    (cache / "helm.version").write_text("v3.21.0\n")
    assert assets.find("helm") is None, "a helm of another version is rebuilt"
    (cache / "helm.version").write_text("v3.22.0\n")
    assert assets.find("helm") == helm

    explicit = make_binary(tmp_path / "explicit" / "helm")
    monkeypatch.setenv("TEST_ASSET_HELM", str(explicit))
    assert assets.find("helm") == explicit


def test_a_build_step_streams_into_a_stderr_without_a_file_descriptor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under pytest's capture (or any stderr that is not a file) a build step's output still
    reaches stderr, and its exit code is kept; it used to fail with ``UnsupportedOperation:
    fileno`` before the build started (an upstream e2e suite built inside a test)."""
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stderr", captured)
    proc = assets._run_build(
        ["sh", "-c", "echo building; echo failed >&2; exit 3"], env=dict(os.environ), quiet=False
    )
    assert proc.returncode == 3
    assert captured.getvalue() == "building\nfailed\n"
    quiet = assets._run_build(["sh", "-c", "echo kept"], env=dict(os.environ), quiet=True)
    assert (quiet.returncode, quiet.stdout) == (0, "kept\n")
