"""The base classes of every gnnperf benchmark."""
from __future__ import annotations

import torch

from .caches import prepared
from .compat import is_minibatch, uses
from . import suite


class Benchmark:
    """The base of every gnnperf benchmark, owning asv's ``setup`` (as
    scikit-learn's suite's ``Estimator`` does): it pins the threads, picks
    the device, and turns what a benchmark needs into n/a
    (:class:`NotImplementedError`) before any work, then calls
    :meth:`make` with the cache and the named parameters.

    Attributes:
        needs_cuda: A CUDA-only figure: n/a on CPU runners.
        technique: Applies only to variants that use this technique.
        minibatch: Applies only to mini-batch (sampled-subgraph) variants.
    """
    needs_cuda = False
    technique: str | None = None
    minibatch = False

    #: asv's version of every benchmark (asv keeps one history per version):
    #: a class whose figure changes meaning (another budget, another unit,
    #: another thing measured) sets its own, higher; an edit that keeps the
    #: meaning keeps the history.
    version = "1"

    def setup(self, *args):
        suite.set_threads()
        has_cache = hasattr(self, "setup_cache")
        cache, params = (args[0], args[1:]) if has_cache else (None, args)
        named = dict(zip(getattr(self, "param_names", []), params))
        self.device = suite.require_cuda() if self.needs_cuda else suite.device()
        name = named.get("variant")
        if name is not None and self.technique and not uses(name, self.technique):
            raise NotImplementedError(f"applies to {self.technique} variants only")
        if name is not None and self.minibatch and not is_minibatch(name):
            raise NotImplementedError("only mini-batch variants sample edges")
        self.make(cache, **named)

    def make(self, cache, **params) -> None:
        """What the measured methods use (built once per process where costly)."""

    def teardown(self, *args):
        """A prepared case's latest loss must be finite: a benchmark that
        timed NaN arithmetic fails (asv records no result when teardown
        raises), naming the step."""
        prep = getattr(self, "prep", None)
        loss = getattr(prep, "last_loss", None)
        if loss is not None:
            prep.check_loss(loss)


class _CudaStepPeak(Benchmark):  # private: asv discovers no benchmark here itself
    """``torch.cuda.max_memory_allocated`` over one warm step, reset before
    it, above what the process held before the run was built (the device's
    warm-up and anything earlier left are excluded; the run's graph, model,
    optimiser state and the step's one batch are in): the figure ``gnnperf
    run`` reports as ``cuda_peak_bytes``. Only the step's batch is prepared
    on the device, not an epoch of them. n/a on machines without CUDA. A
    subclass's parameters are the graph, then the variant, optionally the
    model."""

    needs_cuda = True
    # 2: one prepared batch and the peak above what was held before the
    # build (1 held an epoch's batches and reported the absolute peak).
    version = "2"

    def make(self, cache, **params) -> None:
        graph, variant, *model = params.values()
        self.prep = prepared(cache, graph, variant, warm=True, model=(model or ["gcn"])[0],
                             fixed_batch=True)

    def track_cuda_peak_mib(self, cache, *params):
        """MiB over the next step, the peak reset before it, above what was
        held before the build (model, data, one batch and the step's own)."""
        suite.CASES.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.prep.synced_step()
        held = self.prep.held_bytes or 0
        return (torch.cuda.max_memory_allocated(self.device) - held) / 2**20

    track_cuda_peak_mib.unit = "MiB"


class CachedFigures(Benchmark):
    """A benchmark whose figures ``setup_cache`` measured once per run:
    :attr:`figures` is the entry under :meth:`figure_key`; a string or an
    ``n/a`` entry makes the benchmark n/a, an ``error`` entry fails it."""

    def figure_key(self, **params):
        return tuple(params.values())

    def make(self, cache, **params) -> None:
        if isinstance(cache, dict) and "n/a" in cache:
            raise NotImplementedError(cache["n/a"])
        figures = cache.get(self.figure_key(**params), "not measured")
        if isinstance(figures, str):
            raise NotImplementedError(figures)
        if "n/a" in figures:
            raise NotImplementedError(figures["n/a"])
        if "error" in figures:  # fails in setup: the traceback is in asv's output
            raise RuntimeError(f"measurement failed:\n{figures['error']}")
        self.figures = figures

    def figure(self, name: str):
        if "error" in self.figures:
            raise RuntimeError(f"measurement failed: {self.figures['error']}")
        return self.figures[name]

