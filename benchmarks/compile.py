"""One-off costs reported apart from steady state: compilation of the compiled
variants (seconds spent compiling, Dynamo graph breaks and recompiles; each
(dataset, variant) compiles cold once per ``asv run`` in a fresh interpreter
with an empty inductor cache), Cluster-GCN's METIS partition and
GraphSAINT's pre-sampling."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from . import base, caches, compat, profiles, suite
from .profiles import PROFILE

def _fresh_compile_caches() -> None:
    """Point inductor (and Triton) at an empty cache: a warm on-disk cache
    would turn compile seconds into cache-load seconds."""
    root = tempfile.mkdtemp(prefix="gnnperf-asv-inductor-")
    # measure() runs in a fresh interpreter that exits normally (28 of these
    # folders were left in /tmp by earlier runs).
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = root
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    # A private Inductor option (torch 2.11 to 2.13 have it): where a torch
    # lacks it, the empty cache directory alone keeps the compile cold.
    import torch
    import torch._inductor.config as inductor_config
    if hasattr(inductor_config, "fx_graph_cache"):
        inductor_config.fx_graph_cache = False
    else:
        print(f"gnnperf: torch {torch.__version__}'s Inductor has no fx_graph_cache option; "
              f"the empty cache directory alone keeps the compile cold", file=sys.stderr)


def measure(dataset: str, variant: str) -> dict:
    """Compiles :obj:`variant` on :obj:`dataset` cold and returns its figures."""
    suite.set_threads()
    compat.variant(variant)  # n/a where this commit lacks it
    data = compat.gnnperf_name("data.load_dataset")(dataset)
    dev = suite.device()
    _fresh_compile_caches()
    compat.warm_device(dev)  # the device's first use (context, cuBLAS handles) is not compilation
    case = caches.case(dataset, variant)
    run = suite.CASES.build(case, data)
    counter = getattr(run, "compile_counter", None)
    if counter is None:
        raise suite.NotHere("this commit's compiled technique has no compile counter")
    prep = suite.CASES.PreparedCase(case, run, list(run.batches())[:1])
    first = prep.timed_steps(1).wall  # compiles
    graphs_after_first = counter.graphs
    for _ in range(3):  # fresh batches: sampled shapes vary epoch to epoch
        for batch in run.batches():
            run.step(batch)
    warm = [prep.timed_steps(1).wall for _ in range(5)]
    return {
        "compile_seconds": max(first - statistics.median(warm), 0.0),
        "graph_breaks": counter.graph_breaks,
        "recompiles": counter.graphs - graphs_after_first,
    }


_PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
c = importlib.import_module(sys.argv[2] + ".compile")
suite = importlib.import_module(sys.argv[2] + ".suite")
out = suite.measured_or_reason(c.measure, sys.argv[3], sys.argv[4])  # n/a only if declared
print("GNNPERF-ASV-COMPILE " + json.dumps(out))
"""


def _suite_package() -> tuple[str, str]:
    """(the folder to put on the path, the package) that import this suite
    as asv imported it: ``benchmarks`` from gnnperf's checkout, or an
    adopting repository's shim (``.gnnperf/benchmarks``) over the installed
    ``gnnperf.asv_suite``, whose files lie elsewhere than the package."""
    top = sys.modules[__package__.split(".")[0]]
    return str(Path(top.__file__).resolve().parent.parent), __package__


def compile_cache(self):
    """Measures every (dataset, compiled variant) once per ``asv run``, each in
    a fresh interpreter: a cold compile costs tens of seconds on 2 cores, and
    the three track_ figures come from the same compile."""
    parent, package = _suite_package()
    results = {}
    for dataset in Compile.params[0]:
        for variant in Compile.params[1]:
            proc = subprocess.run([sys.executable, "-c", _PROBE, parent, package, dataset,
                                   variant],
                                  capture_output=True, text=True)
            lines = [line for line in proc.stdout.splitlines()
                     if line.startswith("GNNPERF-ASV-COMPILE ")]
            if proc.returncode == 0 and lines:
                results[f"{dataset}|{variant}"] = json.loads(lines[-1].split(" ", 1)[1])
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
                results[f"{dataset}|{variant}"] = {"error": f"exit {proc.returncode}: {tail}"}
    return results


compile_cache.timeout = 3600


class Compile(base.CachedFigures):
    params = [list(PROFILE.datasets), profiles.variants_with("compiled", PROFILE.compile_extra)]
    param_names = ["dataset", "variant"]
    setup_cache = compile_cache
    timeout = 3600

    technique = "compiled"

    def figure_key(self, dataset, variant):
        return f"{dataset}|{variant}"

    def track_compile_seconds(self, cache, dataset, variant):
        """First step minus a warm step: Dynamo tracing, AOTAutograd and
        inductor code generation, with an empty inductor cache."""
        return self.figure("compile_seconds")

    track_compile_seconds.unit = "seconds"

    def track_graph_breaks(self, cache, dataset, variant):
        return self.figure("graph_breaks")

    track_graph_breaks.unit = "breaks"

    def track_recompiles(self, cache, dataset, variant):
        """Graphs compiled after the first step, over three more epochs."""
        return self.figure("recompiles")

    track_recompiles.unit = "graphs"


class _TrainingSetupCost(base.Benchmark):
    """Builds the variant once per (dataset, variant) with an empty gnnperf
    cache (a cached METIS partition would hide its cost) and reads the
    seconds its technique reports."""
    param_names = ["dataset", "variant"]
    setup_cache = caches.training_datasets_cache
    timeout = 900
    stat = ""
    _built: dict = {}

    def make(self, cache, dataset, variant):
        key = (dataset, variant)
        if key not in self._built:
            # Removed here: asv's forkserver ends a benchmark with os._exit, so
            # no atexit hook would run.
            scratch = tempfile.mkdtemp(prefix="gnnperf-asv-cache-")
            before = os.environ.get("GNNPERF_CACHE")
            os.environ["GNNPERF_CACHE"] = scratch
            try:
                run = caches.build_run(cache, dataset, variant)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
                if before is None:
                    os.environ.pop("GNNPERF_CACHE", None)
                else:
                    os.environ["GNNPERF_CACHE"] = before
            seconds = getattr(run, "setup_seconds", {})
            if self.stat not in seconds:
                raise NotImplementedError(f"this commit's {self.technique} reports no {self.stat}")
            self._built[key] = float(seconds[self.stat])
        self.seconds = self._built[key]


class Partition(_TrainingSetupCost):
    """Cluster-GCN's METIS partition (pymetis), cold."""
    params = [list(PROFILE.datasets), profiles.variants_with("cluster")]
    technique, stat = "cluster", "partition"

    def track_partition_seconds(self, cache, dataset, variant):
        return self.seconds

    track_partition_seconds.unit = "seconds"


class Presample(_TrainingSetupCost):
    """GraphSAINT's pre-sampling of subgraphs for its normalisation."""
    params = [list(PROFILE.datasets), profiles.variants_with("saint")]
    technique, stat = "saint", "presample"

    def track_presample_seconds(self, cache, dataset, variant):
        return self.seconds

    track_presample_seconds.unit = "seconds"
