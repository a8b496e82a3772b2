"""Training: config, optimiser, deterministic batching, the loop, checkpoints, losses."""
from posjax.training.checkpoint import CheckpointCorrupted, Checkpointer
from posjax.training.config import TrainConfig, make_optimizer, make_schedule
from posjax.training.data import ArrayBatches, iterate
from posjax.training.loop import InvalidBatch, TrainResult, TrainingDiverged, make_train_step, train
from posjax.training.losses import accuracy, classification_loss, evaluate_classifier
from posjax.training.run_dir import RunDirLocked

__all__ = ["ArrayBatches", "CheckpointCorrupted", "Checkpointer", "InvalidBatch", "RunDirLocked",
           "TrainConfig", "TrainResult", "TrainingDiverged",
           "accuracy", "classification_loss", "evaluate_classifier", "iterate",
           "make_optimizer", "make_schedule", "make_train_step", "train"]
