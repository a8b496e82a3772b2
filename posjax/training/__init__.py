"""Training: config, optimiser, deterministic batching, the loop, checkpoints, losses."""
from posjax.training.checkpoint import CheckpointCorrupted, Checkpointer
from posjax.training.chunked_ce import chunked_cross_entropy, dense_cross_entropy
from posjax.training.config import TrainConfig, make_optimizer, make_schedule
from posjax.training.data import ArrayBatches, iterate
from posjax.training.loop import InvalidBatch, TrainResult, TrainingDiverged, make_train_step, train
from posjax.training.losses import accuracy, classification_loss, evaluate_classifier
from posjax.training.run_dir import RunDirLocked

__all__ = ["ArrayBatches", "CheckpointCorrupted", "Checkpointer", "InvalidBatch", "RunDirLocked",
           "TrainConfig", "TrainResult", "TrainingDiverged", "chunked_cross_entropy",
           "dense_cross_entropy",
           "accuracy", "classification_loss", "evaluate_classifier", "iterate",
           "make_optimizer", "make_schedule", "make_train_step", "train"]
from posjax.training.ensemble import EnsembleResult, train_ensemble  # noqa: E402

__all__ += ["EnsembleResult", "train_ensemble"]
from posjax.training.evaluation import (apply_batched, batched_apply, group_accuracy,  # noqa: E402
                                        lm_exact_match, masked_lm_loss, predict_classes)

__all__ += ["apply_batched", "batched_apply", "group_accuracy", "lm_exact_match",
            "masked_lm_loss", "predict_classes"]
