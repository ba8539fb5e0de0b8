"""Compilation cost of the compiled variants: seconds spent compiling, Dynamo
graph breaks and recompiles. Each figure is measured cold in its own process
(asv spawns one per benchmark) with a fresh, empty inductor cache."""
from __future__ import annotations

import os
import statistics
import tempfile
import time

from . import common
from .common import PROFILE

_MEASURED: dict[tuple, dict] = {}


def _fresh_compile_caches() -> None:
    """Point inductor (and Triton) at an empty cache: a warm on-disk cache
    would turn compile seconds into cache-load seconds."""
    root = tempfile.mkdtemp(prefix="gnnperf-asv-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = root
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    try:
        import torch._inductor.config as inductor_config
        inductor_config.fx_graph_cache = False
    except Exception:  # pragma: no cover - older torch
        pass


def _measure(cache, dataset: str, variant: str) -> dict:
    key = (dataset, variant)
    if key in _MEASURED:
        return _MEASURED[key]
    spec = common.variant(variant)
    data = common.dataset(cache, dataset)
    dev = common.device()
    _fresh_compile_caches()
    run = spec.build(data, common.train_config(), dev)
    counter = getattr(run, "compile_counter", None)
    if counter is None:
        raise NotImplementedError("this commit's compiled technique has no compile counter")
    batches = list(run.batches())
    common.synchronize(dev)
    start = time.perf_counter()
    run.step(batches[0])  # compiles
    common.synchronize(dev)
    first = time.perf_counter() - start
    graphs_after_first = counter.graphs
    for _ in range(3):  # fresh batches: sampled shapes vary epoch to epoch
        for batch in run.batches():
            run.step(batch)
    warm = []
    for _ in range(5):
        common.synchronize(dev)
        start = time.perf_counter()
        run.step(batches[0])
        common.synchronize(dev)
        warm.append(time.perf_counter() - start)
    _MEASURED[key] = {
        "compile_seconds": max(first - statistics.median(warm), 0.0),
        "graph_breaks": counter.graph_breaks,
        "recompiles": counter.graphs - graphs_after_first,
    }
    return _MEASURED[key]


class Compile:
    params = [list(PROFILE.datasets), common.variants_with("compiled", PROFILE.compile_extra)]
    param_names = ["dataset", "variant"]
    setup_cache = common.training_datasets_cache
    timeout = 900

    def setup(self, cache, dataset, variant):
        common.set_threads()
        if "compiled" not in variant.split("+"):
            raise NotImplementedError("compile metrics apply to compiled variants only")
        common.variant(variant)  # n/a where this commit lacks it

    def track_compile_seconds(self, cache, dataset, variant):
        """First step minus a warm step: Dynamo tracing, AOTAutograd and
        inductor code generation, cold."""
        return _measure(cache, dataset, variant)["compile_seconds"]

    track_compile_seconds.unit = "seconds"

    def track_graph_breaks(self, cache, dataset, variant):
        return _measure(cache, dataset, variant)["graph_breaks"]

    track_graph_breaks.unit = "breaks"

    def track_recompiles(self, cache, dataset, variant):
        """Graphs compiled after the first step, over three epochs."""
        return _measure(cache, dataset, variant)["recompiles"]

    track_recompiles.unit = "graphs"
