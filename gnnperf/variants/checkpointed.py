"""Activation checkpointing: recompute each layer block in the backward pass."""
from __future__ import annotations

from gnnperf.variants.base import Technique, TrainingRun


class Checkpointed(Technique):
    """Checkpoints whole blocks (dropout, conv, ReLU): checkpointing only the
    conv barely lowers the peak, as dropout and ReLU still save tensors."""
    name = "checkpointed"
    order = 20
    # Inductor cannot rematerialise dropout's random numbers inside a traced
    # backward ("does not support RNG ops in recompute regions"), so
    # compiled+checkpointed compiles the forward only.
    traceable_step = False

    def apply(self, run: TrainingRun) -> None:
        run.model.checkpoint = True
