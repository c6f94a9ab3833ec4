"""Feature gates: known names, defaults off, unknown names are errors naming the gate."""

from __future__ import annotations

import pytest

from trainer import features


@pytest.fixture(autouse=True)
def _fresh_gates():
    features.reset()
    yield
    features.reset()


def test_every_gate_is_off_by_default():
    assert features.KNOWN, "at least TrainJobStatus is known"
    for name, spec in features.KNOWN.items():
        assert spec.default is False
        assert features.enabled(name) is False


def test_set_from_map_and_flag_override():
    features.set_from_map({"TrainJobStatus": True})
    assert features.enabled("TrainJobStatus")
    features.set_from_map(features.parse_flag("TrainJobStatus=false"))
    assert not features.enabled("TrainJobStatus")


def test_unknown_gate_is_rejected_by_name_and_changes_nothing():
    with pytest.raises(features.FeatureGateError, match="unrecognized feature gate: Bogus"):
        features.set_from_map({"TrainJobStatus": True, "Bogus": True})
    assert not features.enabled("TrainJobStatus")
    with pytest.raises(features.FeatureGateError, match="unrecognized feature gate: Bogus"):
        features.parse_flag("Bogus=true")
    with pytest.raises(features.FeatureGateError, match="must be true or false"):
        features.parse_flag("TrainJobStatus=maybe")
    with pytest.raises(features.FeatureGateError, match="unrecognized feature gate: Nope"):
        features.enabled("Nope")


def test_override_restores():
    with features.override("TrainJobStatus", True):
        assert features.enabled("TrainJobStatus")
    assert not features.enabled("TrainJobStatus")


def test_entry_point_refuses_an_unknown_gate(tmp_path):
    """`trainer-controller-manager` exits 1 naming the gate, from the file or the flag."""
    from trainer.__main__ import main

    assert main(["--feature-gates=Bogus=true"]) == 1
    config = tmp_path / "config.yaml"
    config.write_text("featureGates:\n  Bogus: true\n")
    assert main([f"--config={config}"]) == 1
    assert not features.enabled("TrainJobStatus")
