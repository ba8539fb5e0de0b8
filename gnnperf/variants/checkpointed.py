"""Activation checkpointing: recompute each layer block in the backward pass."""
from __future__ import annotations

from gnnperf.models import BLOCKS
from gnnperf.variants.base import Technique, TrainingRun


class Checkpointed(Technique):
    """Checkpoints whole blocks (dropout, conv, ReLU): checkpointing only the
    conv barely lowers the peak, as dropout and ReLU still save tensors."""
    name = "checkpointed"
    order = 20
    needs_model = (BLOCKS,)
    # Inductor: "does not support RNG ops in recompute regions".
    step_untraceable_because = ("Inductor cannot recompute dropout's random numbers in a traced "
                                "backward")

    def apply(self, run: TrainingRun) -> None:
        run.model.checkpoint = True
