"""Training: config, optimiser, deterministic batching, the loop, checkpoints, losses."""
from posjax.training.checkpoint import Checkpointer
from posjax.training.config import TrainConfig, make_optimizer, make_schedule
from posjax.training.data import ArrayBatches, iterate, pack_sequences
from posjax.training.loop import TrainResult, TrainingDiverged, make_train_step, train
from posjax.training.losses import accuracy, classification_loss, evaluate_classifier

__all__ = ["ArrayBatches", "Checkpointer", "TrainConfig", "TrainResult", "TrainingDiverged",
           "accuracy", "classification_loss", "evaluate_classifier", "iterate", "pack_sequences",
           "make_optimizer", "make_schedule", "make_train_step", "train"]
