"""Exact work metrics of one training step per variant, as asv ``track_``
benchmarks: ATen op count, FLOPs, profiled op events, bytes allocated and
peak bytes (:mod:`gnnperf.measure.workcount`), and compiled graphs, graph breaks and
recompiles for compiled variants. They are identical on every run of an
unchanged commit, so any step in their history is a structural change.

Benchmarks come from the working tree while gnnperf comes from each
benchmarked commit, so a commit without :mod:`gnnperf.measure.workcount` or without a
variant makes the affected benchmarks n/a (``NotImplementedError``), as do a
declared "cannot here" (:func:`suite.declared_na`) and metrics that do not
apply (graph breaks of an eager variant). Any other error while a case is
built or counted fails its benchmarks, with its traceback.
"""
from __future__ import annotations

from . import base, compat, profiles, suite
from .profiles import VARIANTS

DATASETS = list(profiles.PROFILE.work_datasets or suite.CASES.DEFAULT_DATASETS)


def _measure_all() -> dict:
    """Work metrics of every (dataset, variant), or ``{"n/a": ...}`` /
    ``{"error": ...}`` (:func:`suite.measured_or_reason`): the cases
    prepared by ``gnnperf/measure/case.py``, measured by the commit's
    :func:`gnnperf.measure.workcount.measure_work`."""
    try:
        from gnnperf.data import load_dataset
        measure_work = compat.gnnperf_name("measure.workcount.measure_work",
                                           "workcount.measure_work")
    except (ImportError, NotImplementedError) as exc:
        return {"n/a": f"this commit's gnnperf lacks the work counter: {exc}"}

    def measure(data, dataset, variant):
        compat.variant(variant)  # n/a where this commit lacks it
        case = suite.CASES.Case(variant, dataset, threads=suite.THREADS)
        return measure_work(suite.CASES.prepare(case, data)).exact()

    results: dict = {}
    for dataset in DATASETS:
        data = suite.measured_or_reason(lambda: {"data": load_dataset(dataset)})
        for variant in VARIANTS:
            results[dataset, variant] = (suite.measured_or_reason(
                measure, data["data"], dataset, variant) if "data" in data else data)
    return results


class _Base(base.CachedFigures):
    params = [DATASETS, VARIANTS]
    param_names = ["dataset", "variant"]
    timeout = 900  # compiles the compiled variants once per dataset

    def setup_cache(self):
        return _measure_all()

    def make(self, cache, dataset, variant):
        super().make(cache, dataset=dataset, variant=variant)
        self.metrics = self.figures


class WorkMetrics(_Base):
    """Work of one training step (the same batch each time, after warm-up).

    The memory figures are the step's own device's (on a GPU the host's are
    apart, never summed in). No asv ``version`` bump for that: the CPU
    figures are unchanged, and a bump would restart every CPU history,
    while no GPU results exist yet to mix with."""

    def track_aten_ops(self, cache, dataset, variant):
        return self.metrics["aten_ops"]
    track_aten_ops.unit = "ops"

    def track_flops(self, cache, dataset, variant):
        return self.metrics["flops"]
    track_flops.unit = "flops"

    def track_profiled_ops(self, cache, dataset, variant):
        return self.metrics["profiled_ops"]
    track_profiled_ops.unit = "events"

    def track_bytes_allocated(self, cache, dataset, variant):
        if self.metrics["bytes_allocated"] is None:
            raise NotImplementedError("no profiler memory events")
        return self.metrics["bytes_allocated"]
    track_bytes_allocated.unit = "bytes"

    def track_peak_bytes(self, cache, dataset, variant):
        if self.metrics["peak_bytes"] is None:
            raise NotImplementedError("no profiler memory events")
        return self.metrics["peak_bytes"]
    track_peak_bytes.unit = "bytes"


class CompileMetrics(_Base):
    """Dynamo's graphs, graph breaks and recompiles (compiled variants only)."""

    def make(self, cache, dataset, variant):
        super().make(cache, dataset, variant)
        if self.metrics["compiled_graphs"] is None:
            raise NotImplementedError(f"{variant} is not compiled")

    def track_compiled_graphs(self, cache, dataset, variant):
        return self.metrics["compiled_graphs"]
    track_compiled_graphs.unit = "graphs"

    def track_graph_breaks(self, cache, dataset, variant):
        return self.metrics["graph_breaks"]
    track_graph_breaks.unit = "breaks"

    def track_recompiles(self, cache, dataset, variant):
        return self.metrics["recompiles"]
    track_recompiles.unit = "recompiles"
