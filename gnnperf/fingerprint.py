"""The environment fingerprint: everything besides the code that moves the
figures (library versions, device, threads, allocator, commit, seed), and the
opt-in glibc allocator tuning it records."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

# glibc's defaults return freed blocks of a few MiB to the OS, so the next
# allocation page-faults them in again; keeping them in the heap makes
# loader batches faster (the same lever as tcmalloc/jemalloc in PyTorch's CPU
# tuning guide).
# Opt-in: it is not what a plain process gets.
TUNED_MALLOC = {"M_MMAP_THRESHOLD": (-3, 32 * 2 ** 20), "M_TRIM_THRESHOLD": (-1, 256 * 2 ** 20)}


def tune_allocator() -> bool:
    """Applies :data:`TUNED_MALLOC` through glibc's ``mallopt``; False where
    there is no glibc."""
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return all(libc.mallopt(option, value) == 1 for option, value in TUNED_MALLOC.values())


def allocator_description(tuned: bool) -> str:
    """What the environment fingerprint records about the C allocator."""
    env = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k == "LD_PRELOAD"}
    base = "glibc tuned (" + ", ".join(f"{k}={v}" for k, (_, v) in TUNED_MALLOC.items()) + ")" \
        if tuned else "default"
    return base + (f"; env {env}" if env else "")


def environment(seed: int, device: torch.device, tuned_allocator: bool = False) -> dict:
    """A fingerprint of everything that moves the figures."""
    import torch_geometric

    from gnnperf.sampling.neighbor import native_sampler_available
    commit, dirty = _git_state(Path(__file__).parent)
    return {
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "device": str(device),
        "device_name": device_name(device),
        "cuda": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "native_sampler": native_sampler_available(),
        "allocator": allocator_description(tuned_allocator),
        "git_commit": commit,
        "git_dirty": dirty,
        "seed": seed,
    }


def _git_state(package: Path) -> tuple[str | None, bool | None]:
    """The commit gnnperf's checkout is at, and whether its package's
    tracked files differ from it (what ran was not that commit's code);
    (None, None) outside a git checkout, an installed wheel say."""
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=package,
                              capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."],
                                cwd=package, capture_output=True, text=True, timeout=10)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return head.stdout.strip(), dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
