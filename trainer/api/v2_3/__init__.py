"""API models of level v2.3: Kubeflow Trainer v2.3.0 and JobSet v0.12.0.

Kept light on purpose (importing a constants module must not load every model):

| module | what |
|---|---|
| ``trainer_v1alpha1`` | TrainJob, TrainingRuntime, ClusterTrainingRuntime (Trainer v2.3.0) |
| ``jobset_v1alpha2`` | JobSet (JobSet v0.12.0); ``JobSetSpec`` is embedded by the runtimes |
| ``trainer_constants``, ``jobset_constants`` | the strings v2.3 adds or changes; the rest are v2.1's |
| ``core`` | core types the v2.3 models embed beyond v2.1's |
| ``kinds`` | ``CRD_KINDS`` and ``OPENAPI_SNAPSHOT``: what ``crdgen --models=trainer.api.v2_3.kinds`` reads |

Classes whose schema is the same at both levels are imported from the v2.1 modules
(``trainer.api.trainer_v1alpha1``, ``trainer.api.jobset_v1alpha2``); a class is defined here only
where v2.3's schema differs, so ``isinstance`` across levels means "same schema".
"""
