"""Reconcilers of the product: Trainer (TrainJob, TrainingRuntime, ClusterTrainingRuntime) and friends."""
