"""Each technique against its reference on the same graph in the same
process: step-time and peak-memory ratios, and the accuracy cost. The
reference is the variant without the technique (``sampled+trimmed`` against
``sampled``, ``sparse`` against ``baseline``), so a new registry entry gets its
ratio here with no edit. Steps alternate A B A B so machine drift hits both.
Lower is better for every figure (asv's convention)."""
from __future__ import annotations

import statistics
import time

from . import common
from .common import PROFILE, VARIANTS

# Widths where the techniques differ most: the tutorial's 16, and 256 where the
# per-edge messages dominate a full-graph step.
HIDDEN = (16,) if PROFILE.name == "quick" else (16, 256)
STEPS = 5 if PROFILE.name == "quick" else 15
COMPARED = [v for v in VARIANTS if v != "baseline"] or ["sparse"]


def compare(data, variant: str, hidden: int, reference: str | None = None) -> dict[str, float]:
    """Ratios of :obj:`variant` to :obj:`reference` (default: its reference
    variant): interleaved step times, step peaks (after a warm-up step each),
    test error after the steps."""
    if reference is None:
        reference = common.gnnperf_name("variants.reference_variant")(variant)
    step_peak_bytes = common.gnnperf_name("measure.step_peak_bytes")
    dev = common.device()
    for name in (variant, reference):
        common.variant(name)  # n/a where this commit lacks it
    label = str(getattr(data, "name", "graph"))
    runs = [common.CASES.build(common.case(label, name, hidden=hidden), data)
            for name in (variant, reference)]
    batches = [list(run.batches()) for run in runs]
    for run, own in zip(runs, batches):
        run.step(own[0])  # warm-up, compilation included
    peaks = [step_peak_bytes(lambda: run.step(own[0]), dev) or 0
             for run, own in zip(runs, batches)]
    times: list[list[float]] = [[], []]
    last = [None, None]
    for step in range(STEPS):
        for index, (run, own) in enumerate(zip(runs, batches)):
            common.synchronize(dev)
            start = time.perf_counter()
            last[index] = run.step(own[step % len(own)])
            common.synchronize(dev)
            times[index].append(time.perf_counter() - start)
    for name, loss in zip((variant, reference), last):  # no ratio of NaN arithmetic
        common.CASES.check_losses([loss], name, STEPS + 2)
    errors = [1.0 - run.evaluate()["test"] for run in runs]
    return {
        "time_ratio": statistics.median(times[0]) / statistics.median(times[1]),
        "memory_ratio": peaks[0] / peaks[1] if peaks[1] else float("nan"),
        "error_delta": 100.0 * (errors[0] - errors[1]),
    }


def ratios_cache(self):
    """Every (dataset, variant, hidden) compared once per ``asv run``: the three
    figures of a comparison come from one measurement."""
    common.set_threads()
    graphs = common.training_datasets_cache(self)
    figures = {}
    for dataset in PROFILE.datasets:
        for variant in COMPARED:
            for hidden in HIDDEN:  # n/a only where declared (e.g. sparse+amp on CPU)
                figures[dataset, variant, hidden] = common.measured_or_reason(
                    lambda: compare(common.dataset(graphs, dataset), variant, hidden))
    return figures


ratios_cache.timeout = 3600


class TechniqueRatio(common.CachedFigures):
    params = [list(PROFILE.datasets), COMPARED, list(HIDDEN)]
    param_names = ["dataset", "variant", "hidden"]
    setup_cache = ratios_cache
    timeout = 3600


    def track_step_time_ratio(self, figures, dataset, variant, hidden):
        """Median step time of the variant over its reference's."""
        return self.figure("time_ratio")

    def track_step_peak_ratio(self, figures, dataset, variant, hidden):
        """Step peak memory (torch CPU allocations or CUDA allocated) over the reference's."""
        return self.figure("memory_ratio")

    def track_test_error_delta_pts(self, figures, dataset, variant, hidden):
        """Test error after the same few steps minus the reference's, in points."""
        return self.figure("error_delta")

    track_step_time_ratio.unit = "ratio"
    track_step_peak_ratio.unit = "ratio"
    track_test_error_delta_pts.unit = "points"


# The tutorial's plain PyG step (the "tutorial" variant), where this commit has it.
TUTORIAL = "tutorial"
AGAINST_TUTORIAL = [v for v in VARIANTS if v != TUTORIAL] or ["baseline"]


def tutorial_cache(self):
    """Every variant against the tutorial's step, once per ``asv run``."""
    common.set_threads()
    graphs = common.training_datasets_cache(self)
    figures = {}
    for dataset in PROFILE.datasets:
        for variant in AGAINST_TUTORIAL:
            def measure():
                common.variant(TUTORIAL)  # n/a on commits without the reference
                return compare(common.dataset(graphs, dataset), variant, 16, reference=TUTORIAL)
            figures[dataset, variant] = common.measured_or_reason(measure)
    return figures


tutorial_cache.timeout = 3600


class TutorialRatio(common.CachedFigures):
    """A variant's step time over the PyG tutorial's plain step on the same
    graph, interleaved in one process: what a copy of the tutorial would
    cost relative to this variant (lower is better; a rise is a regression
    of the variant or a speed-up of plain PyG)."""
    params = [list(PROFILE.datasets), AGAINST_TUTORIAL]
    param_names = ["dataset", "variant"]
    setup_cache = tutorial_cache
    timeout = 3600

    def track_step_time_ratio_to_tutorial(self, figures, dataset, variant):
        return self.figure("time_ratio")

    track_step_time_ratio_to_tutorial.unit = "ratio"
