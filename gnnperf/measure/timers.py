"""Wall-clock timing that covers queued device work: the one synchronise and
the one timer of the package."""
from __future__ import annotations

import time
from typing import Callable

import torch


def synchronize(device: torch.device) -> None:
    """Waits for queued kernels so wall-clock time covers their execution."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of :obj:`fn`, CUDA work it queued included."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


__all__ = ["synchronize", "timed"]
