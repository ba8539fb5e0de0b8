"""Automatic mixed precision: bf16 autocast on CPU and on GPUs that support
it, fp16 with a gradient scaler on older GPUs."""
from __future__ import annotations

import functools

import torch

from gnnperf.variants.base import Technique, TrainingRun


def amp_dtype(device: torch.device) -> torch.dtype:
    """The autocast dtype used on :obj:`device`."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


class Amp(Technique):
    """Runs forward and loss under :func:`torch.autocast`."""
    name = "amp"
    order = 30

    def apply(self, run: TrainingRun) -> None:
        dtype = amp_dtype(run.device)
        run.autocast = functools.partial(torch.autocast, run.device.type, dtype=dtype)
        if dtype == torch.float16:
            run.scaler = torch.amp.GradScaler(run.device.type)
        run.stats["amp_dtype"] = str(dtype).removeprefix("torch.")
