"""Objects built with upstream's Python models (kubeflow-trainer-api) on our CRDs, read back by ours."""

from __future__ import annotations

import kubeflow_trainer_api.models as upstream
from crdtest import Resource

from trainer.api import trainer_constants as c
from trainer.api.trainer_v1alpha1 import TrainJob


async def test_sdk_train_job_is_stored_and_loads(resources) -> None:  # type: ignore[no-untyped-def]
    trainjobs: Resource = resources(c.GROUP, c.VERSION, "trainjobs")
    sdk = upstream.TrainerV1alpha1TrainJob(
        apiVersion=TrainJob.api_version,
        kind=TrainJob.kind,
        metadata=upstream.IoK8sApimachineryPkgApisMetaV1ObjectMeta(name="sdk-job"),
        spec=upstream.TrainerV1alpha1TrainJobSpec(
            runtimeRef=upstream.TrainerV1alpha1RuntimeRef(name="torch-distributed"),
            trainer=upstream.TrainerV1alpha1Trainer(
                image="pytorch/pytorch",
                numNodes=2,
                env=[upstream.IoK8sApiCoreV1EnvVar(name="A", value="1")],
            ),
        ),
    )
    status, body = await trainjobs.create(sdk.to_dict())
    assert status == 201, body
    job = TrainJob.from_dict(body)
    assert job.to_dict() == body
    assert job.spec is not None and job.spec.trainer is not None
    assert job.spec.trainer.num_nodes == 2
    assert job.spec.runtime_ref.kind == c.ClusterTrainingRuntimeKind  # CRD default
    assert job.spec.managed_by == c.TrainJobControllerName
