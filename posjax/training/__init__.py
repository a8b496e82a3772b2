"""Training: config, optimiser, deterministic batching, the loop and ensembles, checkpoints,
losses and evaluation."""
from posjax.training.checkpoint import CheckpointCorrupted, Checkpointer
from posjax.models.chunked_ce import chunked_cross_entropy, dense_cross_entropy
from posjax.training.config import TrainConfig, make_optimizer, make_schedule
from posjax.training.data import ArrayBatches, iterate, pack_sequences
from posjax.training.loop import (InvalidBatch, TrainResult, TrainingDiverged, make_train_step,
                                  step_function, train)
from posjax.training.losses import accuracy, classification_loss, masked_lm_loss
from posjax.training.run_dir import RunDirLocked
from posjax.training.step_cache import BoundedCache
from posjax.training.positions import check_position_range, randomized_positions
from posjax.training.ensemble import (EnsembleResult, ensemble_step_function, stack_members,
                                      train_ensemble)
from posjax.training.evaluation import (apply_in_batches, evaluate_classifier, group_accuracy,
                                        lm_exact_match, map_in_batches, predict_classes)

__all__ = ["ArrayBatches", "CheckpointCorrupted", "Checkpointer", "EnsembleResult", "InvalidBatch",
           "RunDirLocked", "TrainConfig", "TrainResult", "TrainingDiverged", "accuracy",
           "apply_in_batches", "map_in_batches", "chunked_cross_entropy", "classification_loss",
           "dense_cross_entropy", "evaluate_classifier", "group_accuracy", "iterate",
           "lm_exact_match", "make_optimizer", "make_schedule", "make_train_step",
           "masked_lm_loss", "pack_sequences", "predict_classes", "train", "train_ensemble",
           "check_position_range", "randomized_positions", "step_function",
           "ensemble_step_function", "stack_members", "BoundedCache"]
