"""Level v2.1: Kubeflow Trainer v2.1.0 with JobSet v0.10.1 (docs/behaviour/)."""

from __future__ import annotations

from trainer.jobset.levels import v0_10 as jobset
from trainer.levels.level import ApiLevel
from trainer.runtime.levels import v2_1 as runtime

V2_1 = ApiLevel(
    name="v2.1",
    trainer_version="v2.1.0",
    jobset=jobset.V0_10,
    trainjob_spec_fields=frozenset({"podTemplateOverrides"}),
    manifests="overlays/v2.1",
    local_manifests="local",
    runtimes="runtimes",
    runtime=runtime.V2_1,
    api_models="trainer.api.kinds",
    crd_dir="crd/bases",
)
