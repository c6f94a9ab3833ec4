"""Level v2.3: Kubeflow Trainer v2.3.0 with JobSet v0.12.0 (docs/levels.md; being built)."""

from __future__ import annotations

from trainer.jobset.levels import v0_12 as jobset
from trainer.levels.level import ApiLevel
from trainer.runtime.levels import v2_3 as runtime

V2_3 = ApiLevel(
    name="v2.3",
    trainer_version="v2.3.0",
    jobset=jobset.V0_12,
    trainjob_spec_fields=frozenset({"runtimePatches"}),
    manifests="overlays/v2.3",
    local_manifests="overlays/v2.3/local",
    runtimes="overlays/v2.3/runtimes",
    runtime=runtime.V2_3,
    api_models="trainer.api.v2_3.kinds",
    crd_dir="overlays/v2.3/crd",
    status_server="trainer.statusserver_v2_3",
)
