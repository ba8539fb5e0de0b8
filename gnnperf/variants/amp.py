"""Automatic mixed precision: bf16 autocast on CPU and on GPUs that support
it, fp16 with a gradient scaler on older GPUs."""
from __future__ import annotations

import functools

import torch

from gnnperf.variants.base import Technique, TrainingRun


# Native bf16 tensor-core math starts with compute capability 8.0 (Ampere:
# A100, A10, RTX 30xx; Hopper H100/H200 is 9.0). Older GPUs (V100 7.0, T4
# 7.5) run bf16 only emulated, slower than fp32, although
# torch.cuda.is_bf16_supported() says True there: it counts emulation unless
# told not to, and it asks the current device rather than the run's.
BF16_MIN_CAPABILITY = (8, 0)


def amp_dtype_for(capability: tuple[int, int] | None) -> torch.dtype:
    """The autocast dtype for a CUDA device of :obj:`capability` (``None``:
    not a CUDA device, so bf16, the dtype CPU autocast supports)."""
    if capability is None or tuple(capability) >= BF16_MIN_CAPABILITY:
        return torch.bfloat16
    return torch.float16


def amp_dtype(device: torch.device) -> torch.dtype:
    """The autocast dtype used on :obj:`device`: bf16 on CPU and on GPUs
    with native bf16, fp16 (with a gradient scaler) on older GPUs."""
    device = torch.device(device)
    if device.type != "cuda":
        return amp_dtype_for(None)
    if torch.version.hip:  # ROCm: capability numbers mean something else; ask without emulation
        with torch.cuda.device(device):
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        return torch.bfloat16 if native else torch.float16
    return amp_dtype_for(torch.cuda.get_device_capability(device))


class Amp(Technique):
    """Runs forward and loss under :func:`torch.autocast`."""
    name = "amp"
    order = 30

    def apply(self, run: TrainingRun) -> None:
        chosen = run.config.amp_dtype  # fp16 forced: its scaler path on any device
        dtype = (amp_dtype(run.device) if chosen == "auto"
                 else {"bf16": torch.bfloat16, "fp16": torch.float16}[chosen])
        run.autocast = functools.partial(torch.autocast, run.device.type, dtype=dtype)
        if dtype == torch.float16:
            run.scaler = torch.amp.GradScaler(run.device.type)
        run.stats["amp_dtype"] = str(dtype).removeprefix("torch.")
        if dtype == torch.bfloat16 and amp_dtype(run.device) != dtype:
            run.stats["amp_note"] = "bf16 forced where it is only emulated (slower than fp32)"
