"""How far a step is from what the hardware allows: the machine's roofs
(peak dense FLOP/s, streaming and random-row gather bandwidth), measured once
per device, thread count and torch version and cached, and a step's
roofline figures from its counted work (:class:`gnnperf.measure.workcount.OpCounter`:
FLOPs, bytes moved, the indexed ops' share, the working set) and its time.

The bound of a step is the time its work needs at the roofs,
``max(flops / peak, stream_bytes / stream_bw + gather_bytes / gather_bw)``
(a roofline whose bandwidth roof blends the streaming and the gather roof in
the proportion of the step's bytes), and its roofline % is that bound over
the measured time: 100% is a step at the limit, 10% one that could be ten
times faster on this hardware. Bandwidth depends on where the data lives: the
roofs are measured over a ladder of working sets (1 MiB, cache-resident, to
256 MiB, DRAM, on CPU) and a step is held to the roof interpolated at its
working set (a cache-resident copy or gather runs several times faster than
one from DRAM), so a cache-resident step is not scored against DRAM.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from gnnperf.errors import GnnperfError

MIB = 2 ** 20
#: Working sets the bandwidth roofs are measured at (source and destination
#: together); CUDA's reach past an H200's 60 MiB L2.
CPU_LADDER = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB)
CUDA_LADDER = (4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB)
#: Gathered rows of 128 floats (512 B): wide rows are the gather's best case,
#: which is what a roof must be.
GATHER_ROW_FLOATS = 128
#: Square fp32 GEMM side: long enough to reach the peak, short enough to
#: measure in well under a second.
CPU_GEMM_SIZE, CUDA_GEMM_SIZE = 1024, 8192
REPEATS = 5


@dataclass
class Roofs:
    r"""The roofs of one device at one thread count.

    Args:
        device (str): ``cpu`` or ``cuda[:N]``.
        device_name (str): The CPU model or the GPU's name.
        threads (int): torch intra-op threads they were measured with.
        torch (str): torch's version.
        peak_flops_per_s (float): The best of :data:`REPEATS` square fp32
            GEMMs (TF32 as torch's default leaves it: off).
        stream_bytes_per_s (dict): Copy bandwidth (bytes read and written per
            second) by working-set size in bytes.
        gather_bytes_per_s (dict): Random-row gather bandwidth (rows of
            :data:`GATHER_ROW_FLOATS` floats, read and written) by working set.
        measured_s (float): What measuring them took.
    """
    device: str
    device_name: str
    threads: int
    torch: str
    peak_flops_per_s: float
    stream_bytes_per_s: dict[int, float]
    gather_bytes_per_s: dict[int, float]
    measured_s: float

    def bandwidth(self, kind: str, working_set: int) -> float:
        """The ``stream`` or ``gather`` roof for :obj:`working_set` bytes,
        interpolated between the two ladder sizes around it (log-linear in
        size and bandwidth), the ladder's ends beyond it. The ladder is first
        made non-increasing (a larger working set is never held to a faster
        roof than a smaller one), and interpolation, not the nearest step,
        keeps a roofline % from jumping when a working set crosses a
        ladder size."""
        import math
        ladder = self.stream_bytes_per_s if kind == "stream" else self.gather_bytes_per_s
        sizes = sorted(ladder)
        roofs, best = [], 0.0
        for size in reversed(sizes):
            best = max(best, ladder[size])
            roofs.append(best)
        roofs.reverse()
        if working_set <= sizes[0]:
            return roofs[0]
        for (small, large), (fast, slow) in zip(zip(sizes, sizes[1:]), zip(roofs, roofs[1:])):
            if working_set <= large:
                along = math.log(working_set / small) / math.log(large / small)
                return fast * (slow / fast) ** along
        return roofs[-1]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: dict) -> "Roofs":
        payload = dict(payload)
        for key in ("stream_bytes_per_s", "gather_bytes_per_s"):  # JSON keys are strings
            payload[key] = {int(size): float(value) for size, value in payload[key].items()}
        return cls(**payload)


def _best_seconds(fn: Callable[[], object], device: torch.device, repeats: int,
                  calls: int = 1) -> float:
    """The best of :obj:`repeats` timings of :obj:`calls` calls, per call."""
    from gnnperf.measure.case import timed

    def batch() -> None:
        for _ in range(calls):
            fn()
    fn()  # first touch: page faults and kernel loads stay out
    return min(timed(batch, device) for _ in range(repeats)) / calls


def _calls(working_set: int, device: torch.device) -> int:
    # Small copies take microseconds: timed singly, the timer's own cost and
    # the first touch of the caches understate them, so they run in a batch.
    # A GPU copies 4 MiB in about a kernel launch's time: 4 GiB of
    # calls there, so launches overlap the work (unverified: no GPU yet).
    return max(1, (4096 if device.type == "cuda" else 64) * MIB // working_set)


def _gemm_flops_per_s(size: int, device: torch.device, generator: torch.Generator,
                      repeats: int) -> float:
    a = torch.rand(size, size, device=device, generator=generator)
    b = torch.rand(size, size, device=device, generator=generator)
    out = torch.empty(size, size, device=device)
    return 2 * size ** 3 / _best_seconds(lambda: torch.mm(a, b, out=out), device, repeats)


def _copy_bytes_per_s(working_set: int, device: torch.device, generator: torch.Generator,
                      repeats: int) -> float:
    # Constant values: copies and gathers do not look at them, and drawing
    # 128 MiB of random floats would take longer than the measurement.
    source = torch.full((working_set // 2 // 4,), 0.5, device=device)
    target = torch.empty_like(source)
    return 2 * source.numel() * 4 / _best_seconds(lambda: target.copy_(source), device, repeats,
                                                  _calls(working_set, device))


def _gather_bytes_per_s(working_set: int, device: torch.device, generator: torch.Generator,
                        repeats: int) -> float:
    # Half the working set is the table, half the gathered rows.
    rows = max(working_set // 2 // 4 // GATHER_ROW_FLOATS, 1)
    table = torch.full((rows, GATHER_ROW_FLOATS), 0.5, device=device)
    index = torch.randint(rows, (rows,), device=device, generator=generator)
    gathered = torch.empty_like(table)
    moved = 2 * table.numel() * 4 + index.numel() * index.element_size()
    return moved / _best_seconds(lambda: torch.index_select(table, 0, index, out=gathered),
                                 device, repeats, _calls(working_set, device))


def measure_roofs(device: torch.device, ladder: tuple[int, ...] | None = None,
                  gemm_size: int | None = None, repeats: int = REPEATS) -> Roofs:
    """Measures :obj:`device`'s roofs at torch's current thread count."""
    from gnnperf.fingerprint import device_name
    cuda = device.type == "cuda"
    ladder = ladder or (CUDA_LADDER if cuda else CPU_LADDER)
    size = gemm_size or (CUDA_GEMM_SIZE if cuda else CPU_GEMM_SIZE)
    start = time.perf_counter()
    generator = torch.Generator(device=device).manual_seed(0)
    peak = _gemm_flops_per_s(size, device, generator, repeats)
    stream = {working_set: _copy_bytes_per_s(working_set, device, generator, repeats)
              for working_set in ladder}
    gather = {working_set: _gather_bytes_per_s(working_set, device, generator, repeats)
              for working_set in ladder}
    return Roofs(str(device), device_name(device), torch.get_num_threads(), torch.__version__,
                 peak, stream, gather, time.perf_counter() - start)


def _cache_file(device: torch.device) -> Path:
    from gnnperf.data import cache_dir
    from gnnperf.fingerprint import device_name
    key = f"{device_name(device)}-{device.type}-t{torch.get_num_threads()}-torch{torch.__version__}"
    return cache_dir() / "roofs" / (re.sub(r"[^A-Za-z0-9.+-]+", "_", key) + ".json")


def cached_roofs(device: torch.device, refresh: bool = False) -> Roofs:
    """:obj:`device`'s roofs from the cache (``<cache>/roofs``), measured
    and written there first if absent, unreadable or :obj:`refresh`. One
    process measures while the others wait for its figures: measurements
    side by side would contend for the same cores."""
    from gnnperf.cache import cached

    def load(path: Path) -> Roofs:
        return Roofs.from_dict(json.loads(path.read_text()))

    def build(private: Path) -> Roofs:
        roofs = measure_roofs(device)
        private.write_text(json.dumps(roofs.to_dict(), indent=2))
        return roofs
    return cached(_cache_file(device), load, build, f"roofs of {device}", refresh=refresh)


@dataclass
class StepWork:
    """The counted work of one epoch (:class:`~gnnperf.measure.workcount.OpCounter`):
    roofline FLOPs, bytes moved, the indexed ops' share of them, the working
    set, and the steps it covered."""
    flops: int
    bytes_moved: int
    gather_bytes: int
    working_set_bytes: int
    steps: int

    @classmethod
    def of(cls, ops, steps: int) -> "StepWork":
        """What an :class:`~gnnperf.measure.workcount.OpCounter` counted over :obj:`steps` steps."""
        return cls(ops.flops, ops.bytes_moved, ops.gather_bytes, ops.working_set_bytes, steps)

    def to_dict(self) -> dict:
        return asdict(self)


def assess(work: StepWork, seconds: float, roofs: Roofs) -> dict:
    """The roofline figures of :obj:`work` done in :obj:`seconds`: its
    arithmetic intensity, achieved FLOP/s and bytes/s, the roofs that apply
    to its working set, the bound time, what bounds it (``compute``,
    ``stream`` or ``gather``) and ``roofline_pct``."""
    if seconds <= 0 or work.bytes_moved <= 0:
        raise GnnperfError(f"no roofline for {work} in {seconds} s: nothing was counted or timed")
    stream_bw = roofs.bandwidth("stream", work.working_set_bytes)
    gather_bw = roofs.bandwidth("gather", work.working_set_bytes)
    compute_s = work.flops / roofs.peak_flops_per_s
    stream_s = (work.bytes_moved - work.gather_bytes) / stream_bw
    gather_s = work.gather_bytes / gather_bw
    bound_s = max(compute_s, stream_s + gather_s)
    bound = "compute" if compute_s >= stream_s + gather_s else (
        "gather" if gather_s >= stream_s else "stream")
    return {
        "intensity_flop_per_byte": work.flops / work.bytes_moved,
        "achieved_flops_per_s": work.flops / seconds,
        "achieved_bytes_per_s": work.bytes_moved / seconds,
        "peak_flops_per_s": roofs.peak_flops_per_s,
        "stream_bytes_per_s": stream_bw,
        "gather_bytes_per_s": gather_bw,
        "bound_s": bound_s,
        "bound": bound,
        "roofline_pct": 100 * bound_s / seconds,
    }


def format_roofs(roofs: Roofs) -> str:
    """The roofs as lines for ``gnnperf roofs``."""
    def ladder(values: dict[int, float]) -> str:
        return ", ".join(f"{size / MIB:g} MiB {value / 1e9:.1f}" for size, value in
                         sorted(values.items()))
    return "\n".join([
        f"{roofs.device} ({roofs.device_name}), {roofs.threads} thread(s), torch {roofs.torch}",
        f"peak fp32 GEMM: {roofs.peak_flops_per_s / 1e9:.1f} GFLOP/s",
        f"stream copy GB/s by working set: {ladder(roofs.stream_bytes_per_s)}",
        f"random-row gather GB/s by working set: {ladder(roofs.gather_bytes_per_s)}",
    ])


__all__ = ["CPU_LADDER", "CUDA_LADDER", "Roofs", "StepWork", "assess", "cached_roofs",
           "format_roofs", "measure_roofs"]
