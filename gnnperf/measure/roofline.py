"""How far a step is from what the hardware allows: the machine's roofs
(peak dense FLOP/s, streaming and random-row gather bandwidth), measured once
per device, thread count and torch version and cached, and a step's
roofline figures from its counted work (:class:`gnnperf.measure.workcount.OpCounter`:
FLOPs, bytes moved, the indexed ops' share, the working set) and its time.

The bound of a step is the time no implementation of it can beat at the
roofs, ``max(flops / peak, compulsory_bytes / stream_bw)``: its FLOPs at
the peak, and its compulsory traffic (each memory that existed before the
step and that it reads or writes, once: the data, the parameters, the
optimiser's state; :attr:`~gnnperf.measure.workcount.OpCounter.compulsory_bytes`)
at the streaming roof, the fastest way to move bytes. Its roofline % is
that bound over the measured time, at most 100% by construction whether
the step runs operator by operator (eager) or fused (compiled): 100% is a
step at the limit, 10% one that could be ten times faster on this
hardware. What the operators move one by one (``bytes_moved``, indexed
ops' bytes at the slower gather roof) is reported beside it as "traffic
over compulsory": how much a fused implementation could save. Bandwidth
depends on where the data lives: the roofs are measured over a ladder of
working sets (1 MiB, cache-resident, to 256 MiB, DRAM, on CPU) and a step's
compulsory bytes are held to the roof interpolated at their own footprint
(a cache-resident copy runs several times faster than one from DRAM), so a
cache-resident step is not scored against DRAM. A ladder point that takes about as long as an
empty kernel (a launch on a GPU, a dispatch on CPU) times the launch, not
the memory: it is measured, marked launch-bound and held to no working
set.

Only the work of the device a step runs on is held to that device's roofs:
on a GPU the host's work (an offload step's sampling and gathers) and the
copies between host and device are counted apart (:class:`StepWork`), their
time still in the step's.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
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
#: A ladder point taking less than this many empty kernels' time per call is
#: launch-bound: its time is mostly the launch's (a kernel's own time
#: overlaps the next launch only once it is longer than one), so its
#: bandwidth is the launch rate's, not the memory's.
LAUNCH_BOUND_FACTOR = 3
#: Empty kernels per timing of the launch latency: back to back, as the
#: ladder's small points run.
LAUNCH_CALLS = 1000
#: The cached roofs' format: 2 marks launch-bound points (a cache file of
#: an earlier format is measured again).
ROOFS_FORMAT = 2


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
        launch_s (dict): Per kind (``stream``, ``gather``), the seconds an
            empty kernel of it takes per call, back to back (a one-element
            copy, a one-row gather); empty in roofs measured before it was.
        launch_bound (dict): Per kind, the ladder sizes whose time was
            within :data:`LAUNCH_BOUND_FACTOR` launches: kept as measured,
            used for no working set.
    """
    device: str
    device_name: str
    threads: int
    torch: str
    peak_flops_per_s: float
    stream_bytes_per_s: dict[int, float]
    gather_bytes_per_s: dict[int, float]
    measured_s: float
    launch_s: dict[str, float] = field(default_factory=dict)
    launch_bound: dict[str, list[int]] = field(default_factory=dict)

    def bandwidth(self, kind: str, working_set: int) -> float:
        """The ``stream`` or ``gather`` roof for :obj:`working_set` bytes,
        interpolated between the two ladder sizes around it (log-linear in
        size and bandwidth), the ladder's ends beyond it. Launch-bound
        points are left out first (the largest point stays if all are), so
        a working set below the first real point takes that point's roof.
        The ladder is then made non-increasing (a larger working set is
        never held to a faster roof than a smaller one), and interpolation,
        not the nearest step, keeps a roofline % from jumping when a working
        set crosses a ladder size."""
        import math
        ladder = self.stream_bytes_per_s if kind == "stream" else self.gather_bytes_per_s
        dropped = set(self.launch_bound.get(kind, ()))
        sizes = sorted(size for size in ladder if size not in dropped) or [max(ladder)]
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
        payload["launch_bound"] = {kind: [int(size) for size in sizes]
                                   for kind, sizes in payload.get("launch_bound", {}).items()}
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
                      repeats: int) -> tuple[float, float]:
    """Copy bandwidth at :obj:`working_set` and the seconds of one copy."""
    # Constant values: copies and gathers do not look at them, and drawing
    # 128 MiB of random floats would take longer than the measurement.
    source = torch.full((working_set // 2 // 4,), 0.5, device=device)
    target = torch.empty_like(source)
    seconds = _best_seconds(lambda: target.copy_(source), device, repeats,
                            _calls(working_set, device))
    return 2 * source.numel() * 4 / seconds, seconds


def _gather_bytes_per_s(working_set: int, device: torch.device, generator: torch.Generator,
                        repeats: int) -> tuple[float, float]:
    """Gather bandwidth at :obj:`working_set` and the seconds of one gather."""
    # Half the working set is the table, half the gathered rows.
    rows = max(working_set // 2 // 4 // GATHER_ROW_FLOATS, 1)
    table = torch.full((rows, GATHER_ROW_FLOATS), 0.5, device=device)
    index = torch.randint(rows, (rows,), device=device, generator=generator)
    gathered = torch.empty_like(table)
    moved = 2 * table.numel() * 4 + index.numel() * index.element_size()
    seconds = _best_seconds(lambda: torch.index_select(table, 0, index, out=gathered),
                            device, repeats, _calls(working_set, device))
    return moved / seconds, seconds


def _launch_seconds(kind: str, device: torch.device, repeats: int) -> float:
    """Seconds per call of an empty kernel of :obj:`kind` (a one-element
    copy for ``stream``, a one-row gather for ``gather``), run back to back
    as the ladder's points are: the floor under any point's time."""
    if kind == "stream":
        source = torch.full((1,), 0.5, device=device)
        target = torch.empty_like(source)
        return _best_seconds(lambda: target.copy_(source), device, repeats, LAUNCH_CALLS)
    table = torch.full((1, GATHER_ROW_FLOATS), 0.5, device=device)
    index = torch.zeros(1, dtype=torch.long, device=device)
    gathered = torch.empty_like(table)
    return _best_seconds(lambda: torch.index_select(table, 0, index, out=gathered), device,
                         repeats, LAUNCH_CALLS)


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
    probes = {"stream": _copy_bytes_per_s, "gather": _gather_bytes_per_s}
    bandwidths, launch_s, launch_bound = {}, {}, {}
    for kind, probe in probes.items():
        launch_s[kind] = _launch_seconds(kind, device, repeats)
        measured = {working_set: probe(working_set, device, generator, repeats)
                    for working_set in ladder}
        bandwidths[kind] = {working_set: bandwidth
                            for working_set, (bandwidth, _) in measured.items()}
        launch_bound[kind] = sorted(
            working_set for working_set, (_, seconds) in measured.items()
            if seconds < LAUNCH_BOUND_FACTOR * launch_s[kind])
    return Roofs(str(device), device_name(device), torch.get_num_threads(), torch.__version__,
                 peak, bandwidths["stream"], bandwidths["gather"], time.perf_counter() - start,
                 launch_s, launch_bound)


def _cache_file(device: torch.device) -> Path:
    from gnnperf.data import cache_dir
    from gnnperf.fingerprint import device_name
    key = (f"{device_name(device)}-{device.type}-t{torch.get_num_threads()}"
           f"-torch{torch.__version__}-v{ROOFS_FORMAT}")
    return cache_dir() / "roofs" / (re.sub(r"[^A-Za-z0-9.+-]+", "_", key) + ".json")


def cached_roofs(device: torch.device, refresh: bool = False) -> Roofs:
    """:obj:`device`'s roofs from the cache (``<cache>/roofs``), measured
    and written there first if absent, unreadable or :obj:`refresh`. One
    process measures while the others wait for its figures: measurements
    side by side would contend for the same cores."""
    from gnnperf.shared_cache import cached

    def load(path: Path) -> Roofs:
        return Roofs.from_dict(json.loads(path.read_text()))

    def build(private: Path) -> Roofs:
        roofs = measure_roofs(device)
        private.write_text(json.dumps(roofs.to_dict(), indent=2))
        return roofs
    return cached(_cache_file(device), load, build, f"roofs of {device}", refresh=refresh)


#: Why a GPU step's host work and copies are not held to the GPU's roofs.
EXCLUDED_REASON = ("host work (sampling, gathers, pinning) runs against the host's roofs and "
                   "host-device copies against the link's, not the GPU's: counted apart, their "
                   "time still in the step's")


@dataclass
class StepWork:
    """The counted work of one epoch (:class:`~gnnperf.measure.workcount.OpCounter`)
    on the device the steps run on: roofline FLOPs, bytes moved operator by
    operator, the indexed ops' share of them, the working set, the
    compulsory traffic (each distinct memory touched once) and the steps it
    covered. Off the CPU, what is not the device's is counted apart
    (:data:`EXCLUDED_REASON`): the host's FLOPs and bytes moved, and the
    bytes copied between host and device; :obj:`None` for a CPU step, all of
    whose work is the host's. :obj:`compulsory_bytes` is :obj:`None` in work
    counted before it was (no bound can be drawn from those)."""
    flops: int
    bytes_moved: int
    gather_bytes: int
    working_set_bytes: int
    steps: int
    host_flops: int | None = None
    host_bytes_moved: int | None = None
    transfer_bytes: int | None = None
    compulsory_bytes: int | None = None

    @classmethod
    def of(cls, ops, steps: int, device: torch.device | str | None = None) -> "StepWork":
        """What an :class:`~gnnperf.measure.workcount.OpCounter` counted over
        :obj:`steps` steps run on :obj:`device` (``None``: the CPU)."""
        kind = torch.device(device).type if device is not None else "cpu"
        if kind == "cpu":
            return cls(ops.flops, ops.bytes_moved, ops.gather_bytes, ops.working_set_bytes, steps,
                       compulsory_bytes=ops.compulsory_bytes)
        from gnnperf.measure.workcount import TRANSFER, PlaceWork
        none = PlaceWork()
        on_device, host = ops.places.get(kind, none), ops.places.get("cpu", none)
        return cls(on_device.flops, on_device.bytes_moved, on_device.gather_bytes,
                   ops.working_set_on(kind), steps, host_flops=host.flops,
                   host_bytes_moved=host.bytes_moved,
                   transfer_bytes=ops.places.get(TRANSFER, none).bytes_moved,
                   compulsory_bytes=ops.compulsory_on(kind))

    def per_step(self) -> "StepWork":
        """One step's share of each counted figure (the working set is one
        step's already). The compulsory traffic is each step's summed
        (:meth:`~gnnperf.measure.workcount.OpCounter.end_step`) where the
        steps were told apart, else the loop's as one step, which counts a
        memory reused from step to step once: a lower bound either way."""
        def share(value: int | None) -> int | None:
            return None if value is None else round(value / self.steps)
        return StepWork(share(self.flops), share(self.bytes_moved), share(self.gather_bytes),
                        self.working_set_bytes, 1, share(self.host_flops),
                        share(self.host_bytes_moved), share(self.transfer_bytes),
                        share(self.compulsory_bytes))

    def to_dict(self) -> dict:
        return asdict(self)


def assess(work: StepWork, seconds: float, roofs: Roofs) -> dict:
    """The roofline figures of :obj:`work` done in :obj:`seconds`: its
    arithmetic intensity (FLOPs per compulsory byte), achieved FLOP/s and
    bytes/s, the roofs that apply to its working set, the bound time (its
    FLOPs at the peak or its compulsory traffic at the streaming roof,
    whichever is longer), what bounds it (``compute`` or ``memory``),
    ``roofline_pct`` (at most 100 for any implementation of the step) and
    ``traffic_over_compulsory`` (the operators' bytes over the compulsory
    ones: what fusing them could save)."""
    if seconds <= 0 or work.bytes_moved <= 0:
        raise GnnperfError(f"no roofline for {work} in {seconds} s: nothing was counted or timed")
    if not work.compulsory_bytes:
        raise GnnperfError(f"no roofline for {work}: no compulsory traffic was counted (work "
                           f"counted before gnnperf counted it, or code that touched no memory "
                           f"that existed before it)")
    stream_bw = roofs.bandwidth("stream", work.working_set_bytes)
    gather_bw = roofs.bandwidth("gather", work.working_set_bytes)
    compute_s = work.flops / roofs.peak_flops_per_s
    # The compulsory bytes at the roof of a footprint no larger than theirs:
    # a fused step need not touch the rest of the eager working set, and a
    # smaller footprint is never held to a slower roof.
    bound_bw = roofs.bandwidth("stream", min(work.compulsory_bytes, work.working_set_bytes))
    memory_s = work.compulsory_bytes / bound_bw
    bound_s = max(compute_s, memory_s)
    figures = {
        "intensity_flop_per_byte": work.flops / work.compulsory_bytes,
        "achieved_flops_per_s": work.flops / seconds,
        "achieved_bytes_per_s": work.bytes_moved / seconds,
        "peak_flops_per_s": roofs.peak_flops_per_s,
        "stream_bytes_per_s": stream_bw,
        "gather_bytes_per_s": gather_bw,
        "bound_bytes_per_s": bound_bw,
        "compulsory_bytes": work.compulsory_bytes,
        "traffic_over_compulsory": work.bytes_moved / work.compulsory_bytes,
        "bound_s": bound_s,
        "bound": "compute" if compute_s >= memory_s else "memory",
        "roofline_pct": 100 * bound_s / seconds,
    }
    if work.host_bytes_moved is not None:
        figures["excluded"] = {"host_flops": work.host_flops,
                               "host_bytes_moved": work.host_bytes_moved,
                               "transfer_bytes": work.transfer_bytes, "reason": EXCLUDED_REASON}
    return figures


def format_roofs(roofs: Roofs) -> str:
    """The roofs as lines for ``gnnperf roofs``."""
    def ladder(kind: str, values: dict[int, float]) -> str:
        dropped = set(roofs.launch_bound.get(kind, ()))
        return ", ".join(f"{size / MIB:g} MiB {value / 1e9:.1f}"
                         + (" (launch-bound, unused)" if size in dropped else "")
                         for size, value in sorted(values.items()))
    lines = [
        f"{roofs.device} ({roofs.device_name}), {roofs.threads} thread(s), torch {roofs.torch}",
        f"peak fp32 GEMM: {roofs.peak_flops_per_s / 1e9:.1f} GFLOP/s",
        f"stream copy GB/s by working set: {ladder('stream', roofs.stream_bytes_per_s)}",
        f"random-row gather GB/s by working set: {ladder('gather', roofs.gather_bytes_per_s)}",
    ]
    if roofs.launch_s:
        lines.append("empty kernel per call: " + ", ".join(
            f"{kind} {seconds * 1e6:.1f} us" for kind, seconds in roofs.launch_s.items())
            + f" (a point under {LAUNCH_BOUND_FACTOR} of them is launch-bound)")
    return "\n".join(lines)


__all__ = ["CPU_LADDER", "CUDA_LADDER", "EXCLUDED_REASON", "LAUNCH_BOUND_FACTOR", "Roofs",
           "StepWork", "assess", "cached_roofs", "format_roofs", "measure_roofs"]
