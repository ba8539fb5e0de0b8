"""Each technique against its reference on the same graph in the same
process: step-time and peak-memory ratios, and the accuracy cost. The
reference is the variant without the technique (``sampled+trimmed`` against
``sampled``, ``sparse`` against ``baseline``), so a new registry entry gets its
ratio here with no edit. The runs step in turn (A B, A B; A B C with the
tutorial's step at its width) so machine drift hits each alike.
Lower is better for every figure (asv's convention)."""
from __future__ import annotations

import statistics

import torch

from . import base, caches, compat, suite
from .profiles import PROFILE, VARIANTS

# Widths where the techniques differ most: the tutorial's 16, and 256 where the
# per-edge messages dominate a full-graph step.
HIDDEN = (16,) if PROFILE.name == "quick" else (16, 256)
STEPS = 5 if PROFILE.name == "quick" else 15
COMPARED = [v for v in VARIANTS if v != "baseline"] or ["sparse"]


def compare(data, label: str, variant: str, hidden: int, references: list[str]
            ) -> dict[str, dict]:
    """Ratios of :obj:`variant` to each of :obj:`references` on graph
    :obj:`data` (named :obj:`label` in errors), all built once
    and stepped in turn (A B C, A B C, ...): step times, step peaks (after a
    warm-up step each) and test error after the steps, keyed by reference."""
    step_peak_bytes = compat.gnnperf_name("measure.runner.step_peak_bytes",
                                                 "measure.step_peak_bytes")
    dev = suite.device()
    names = [variant, *references]
    for name in names:
        compat.variant(name)  # n/a where this commit lacks it
    preps = []
    for name in names:
        case = caches.case(label, name, hidden=hidden)
        run = suite.CASES.build(case, data)
        preps.append(suite.CASES.PreparedCase(case, run, list(run.batches())))
    runs = [prep.run for prep in preps]
    for prep in preps:
        prep.run.step(prep.batches[0])  # warm-up, compilation included
    peaks = [_peak_above_start(step_peak_bytes, lambda: prep.run.step(prep.batches[0]), dev)
             for prep in preps]
    # In turn, one timed step each (its loss checked off the clock: no ratio
    # of NaN arithmetic), so that drift hits every run alike.
    times: list[list[float]] = [[] for _ in preps]
    for _ in range(STEPS):
        for index, prep in enumerate(preps):
            times[index].append(prep.timed_steps(1).wall)
    errors = [1.0 - run.evaluate()["test"] for run in runs]
    median = [statistics.median(t) for t in times]
    return {reference: {
        "time_ratio": median[0] / median[i],
        # A peak the probe cannot read here is n/a, never a ratio to 0.
        "memory_ratio": (peaks[0] / peaks[i] if peaks[0] is not None and peaks[i]
                         else float("nan")),
        "error_delta": 100.0 * (errors[0] - errors[i]),
    } for i, reference in enumerate(names) if i}


def _peak_above_start(step_peak_bytes, step, dev) -> int | None:
    """A step's peak above what was allocated at its start, on either device:
    on CUDA the other runs built beside it stay resident, and would dilute
    the ratio (the CPU probe is above the step's start already). The
    subtraction is the suite's, not ``step_peak_bytes``'s ``held`` argument
    (gnnperf.measure.runner.held_bytes): older benchmarked commits lack both."""
    held = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0
    peak = step_peak_bytes(step, dev)
    return None if peak is None else max(peak - held, 0)


# The tutorial's plain PyG step (the "tutorial" variant), where this commit has it.
TUTORIAL = "tutorial"
AGAINST_TUTORIAL = [v for v in VARIANTS if v != TUTORIAL] or ["baseline"]
TUTORIAL_HIDDEN = 16  # the tutorial's width


def comparisons_cache(self):
    """Every comparison once per ``asv run``, shared by both classes: each
    (dataset, variant, hidden) built once and interleaved with its reference
    variant and, at the tutorial's width, with the tutorial's step (one
    build of each variant instead of two, where two caches each building
    their own doubled the quick profile's set-up time)."""
    suite.set_threads()
    graphs = caches.training_datasets_cache(self)
    try:
        compat.variant(TUTORIAL)
        tutorial_here = ""
    except NotImplementedError as exc:  # a commit without the reference
        tutorial_here = str(exc)
    figures = {}
    for dataset in PROFILE.datasets:
        for variant in dict.fromkeys([*COMPARED, *AGAINST_TUTORIAL]):
            for hidden in HIDDEN:
                keys = {}  # reference -> cache key
                if variant in COMPARED:
                    key = ("technique", dataset, variant, hidden)
                    # n/a where this commit lacks the variant or reference_variant.
                    found = suite.measured_or_reason(lambda: {"name": compat.gnnperf_name(
                        "variants.reference_variant")(variant)})
                    if "name" in found:
                        keys[found["name"]] = key
                    else:
                        figures[key] = found
                if variant in AGAINST_TUTORIAL and hidden == TUTORIAL_HIDDEN:
                    if tutorial_here:
                        figures["tutorial", dataset, variant] = {"n/a": tutorial_here}
                    else:
                        keys[TUTORIAL] = ("tutorial", dataset, variant)
                if not keys:
                    continue
                # n/a only where declared (e.g. sparse+amp on CPU).
                outcome = suite.measured_or_reason(
                    lambda: compare(caches.dataset(graphs, dataset), dataset, variant, hidden,
                                    list(keys)))
                if ("n/a" in outcome or "error" in outcome) and len(keys) > 1:
                    # Which run failed is not known: each comparison alone, so
                    # a broken tutorial step fails only the tutorial's ratio.
                    for reference, key in keys.items():
                        figures[key] = suite.measured_or_reason(lambda: compare(
                            caches.dataset(graphs, dataset), dataset, variant, hidden,
                            [reference])[reference])
                else:
                    for reference, key in keys.items():
                        figures[key] = outcome.get(reference, outcome)
    return figures


comparisons_cache.timeout = 3600


class TechniqueRatio(base.CachedFigures):
    params = [list(PROFILE.datasets), COMPARED, list(HIDDEN)]
    param_names = ["dataset", "variant", "hidden"]
    setup_cache = comparisons_cache
    timeout = 3600

    def figure_key(self, dataset, variant, hidden):
        return ("technique", dataset, variant, hidden)

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


class TutorialRatio(base.CachedFigures):
    """A variant's step time over the PyG tutorial's plain step on the same
    graph, interleaved in one process: what a copy of the tutorial would
    cost relative to this variant (lower is better; a rise is a regression
    of the variant or a speed-up of plain PyG)."""
    params = [list(PROFILE.datasets), AGAINST_TUTORIAL]
    param_names = ["dataset", "variant"]
    setup_cache = comparisons_cache
    timeout = 3600

    def figure_key(self, dataset, variant):
        return ("tutorial", dataset, variant)

    def track_step_time_ratio_to_tutorial(self, figures, dataset, variant):
        return self.figure("time_ratio")

    track_step_time_ratio_to_tutorial.unit = "ratio"
