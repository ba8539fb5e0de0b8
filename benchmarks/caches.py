"""Datasets and training runs, made once and kept.

asv_runner runs ``setup`` before every timed call, so ``setup`` only looks
things up: datasets are generated once per ``asv run`` by ``setup_cache``
(written to files so a benchmark process loads only its own graph, which
keeps ``peakmem_`` honest) and training runs are built once per process and
kept in :data:`_RUNS`, built, warmed and batched by
``gnnperf/measure/case.py``.
"""
from __future__ import annotations

import gc
from pathlib import Path

import torch

from .compat import gnnperf_name, variant, warm_device
from .profiles import PROFILE, SCALING_GRAPHS, scale_accuracy_graphs
from . import suite
from .suite import CASES, THREADS, NotHere, declared_na, unavailable_as_na

NA, FAILED = "!", "!!"  # prefixes of a graph-cache entry that is not a path


def _save_graphs(makers: dict, prefix: str = "graph") -> dict[str, str]:
    """Makes each graph once (``makers[key]()``), saved to a file in asv's
    cache directory; returns key -> path, key -> ``"!reason"`` where
    unavailable here (a user's graph absent on this runner: n/a) or
    ``"!!traceback"`` where it failed otherwise (a corrupt or non-finite
    file: failed)."""
    import traceback
    out = {}
    for key, make in makers.items():
        path = Path.cwd() / f"{prefix}-{len(out)}.pt"
        try:
            torch.save(make(), path)
            out[key] = str(path)
        except Exception as exc:  # noqa: BLE001 -- sorted into n/a and failed
            out[key] = (f"{NA}{type(exc).__name__}: {exc}" if declared_na(exc)
                        else f"{FAILED}{traceback.format_exc()}")
    return out


def _write_graphs(names: dict[str, str]) -> dict[str, str]:
    """:func:`_save_graphs` of datasets by name (:func:`gnnperf.data.load_dataset`)."""
    load_dataset = gnnperf_name("data.load_dataset")
    return _save_graphs({key: (lambda name=name: load_dataset(name))
                         for key, name in names.items()})


def training_datasets_cache(self):
    """``setup_cache`` of the per-variant benchmarks (one per ``asv run``,
    shared by every class using it: asv keys it by this function's line)."""
    names = sorted({*PROFILE.datasets, *PROFILE.accuracy_datasets})
    try:
        return _write_graphs({name: name for name in names})
    except NotImplementedError as exc:
        return {name: f"!{exc}" for name in names}


training_datasets_cache.timeout = 600


def scaling_graphs_cache(self):
    """``setup_cache`` of the scaling module."""
    try:
        return _write_graphs({key: SCALING_GRAPHS[key] for key in PROFILE.scaling})
    except NotImplementedError as exc:
        return {key: f"!{exc}" for key in PROFILE.scaling}


scaling_graphs_cache.timeout = 1200


def scale_accuracy_graph_files() -> dict[str, str]:
    """The graphs of :class:`training.SubgraphAccuracyAtScale`, each generated
    once (seed 0) and saved, as :func:`_write_graphs` does."""
    graphs = scale_accuracy_graphs()
    try:
        spec_class = gnnperf_name("data.SyntheticSpec")
        generate = gnnperf_name("data.synthetic_graph")
    except NotImplementedError as exc:
        return {key: f"{NA}{exc}" for key in graphs}
    return _save_graphs({key: (lambda fields=fields: generate(spec_class(**fields), seed=0))
                         for key, fields in graphs.items()}, prefix="scale-graph")

_DATA: dict[str, object] = {}


def dataset(cache: dict, key: str):
    """The graph (a PyG ``Data``) :obj:`key` from a ``setup_cache`` result
    (kept per process), whichever form this commit's loader saved it in."""
    if key not in _DATA:
        path = cache.get(key) if isinstance(cache, dict) else None
        if path is not None and path.startswith(FAILED):
            raise RuntimeError(f"dataset {key} failed to load:\n{path[len(FAILED):]}")
        if path is None or path.startswith(NA):
            raise NotHere(f"dataset {key} unavailable: {path}")
        _DATA.clear()
        _DATA[key] = CASES.graph_of(torch.load(path, weights_only=False))
    return _DATA[key]


# The case module ----------------------------------------------------------------


def case(dataset_key: str, variant_name: str, warmup_epochs: int = 1, model: str = "gcn",
         **config):
    """The :class:`~gnnperf.measure.case.Case` of a benchmark on this runner's device
    (GCN's has no model override: older commits' configs know none)."""
    return CASES.Case.of(variant_name, dataset_key, model, config=config,
                         device=str(suite.device()),
                         threads=THREADS, warmup_epochs=warmup_epochs)


def check_model(model: str, variant_name: str) -> None:
    """n/a where this commit has no such model, or :obj:`variant_name`
    cannot train it (the registry's reason: sparse and GAT); GCN is every
    commit's model."""
    if model == "gcn":
        return
    get_model = gnnperf_name("models.get_model")
    reason = variant(variant_name).cannot_run_with(get_model(model))
    if reason:
        raise NotHere(reason)


def build_run(cache: dict, key: str, variant_name: str, model: str = "gcn", **config):
    """A fresh training run of :obj:`variant_name` (of :obj:`model`) on
    graph :obj:`key` (:func:`gnnperf.measure.case.build`), or
    :class:`NotImplementedError` where this commit lacks the variant."""
    variant(variant_name)
    check_model(model, variant_name)
    with unavailable_as_na():
        return CASES.build(case(key, variant_name, model=model, **config), dataset(cache, key))


_RUNS: dict[tuple, object] = {}


def prepared(cache: dict, key: str, variant_name: str, warm: bool = True,
             model: str = "gcn", fixed_batch: bool = False, fresh: bool = False):
    """A :class:`~gnnperf.measure.case.PreparedCase` of :obj:`variant_name` (of
    :obj:`model`) on graph :obj:`key`: one epoch's batches materialised
    (sampling stays out of the step time), or its first batch alone when
    :obj:`fixed_batch` (a device peak holds one step's batch, not an
    epoch's), after one warm-up epoch (compilation included), or none when
    not :obj:`warm`; ``synced_step`` steps through them. Kept per process,
    unless :obj:`fresh` (a new build, at addresses of its own).
    ``held_bytes`` is the device memory allocated once the process's
    earlier runs were freed and the device warmed, before this build (CUDA;
    None on CPU): what a device peak is reported above."""
    ident = (key, variant_name, warm, model, fixed_batch)
    if fresh or ident not in _RUNS:
        variant(variant_name)  # n/a where this commit lacks it
        check_model(model, variant_name)
        data = dataset(cache, key)
        _RUNS.clear()
        dev = suite.device()
        # An earlier run's reference cycles hold its device memory until collected.
        gc.collect()
        warm_device(dev)  # the device's first use is no step's cost
        held = None
        if dev.type == "cuda":
            CASES.synchronize(dev)
            torch.cuda.empty_cache()
            held = torch.cuda.memory_allocated(dev)
        with unavailable_as_na():
            prep = CASES.prepare(case(key, variant_name, 1 if warm else 0, model), data,
                                 fixed_batch=fixed_batch)
        prep.held_bytes = held
        _RUNS[ident] = prep
    return _RUNS[ident]


def timed_epoch(run, dev: torch.device) -> tuple[float, int]:
    """Seconds of one full epoch (sampling included) and its edges; its
    losses are checked after the clock stops (no time of NaN arithmetic)."""
    def epoch():
        edges, losses = 0, []
        for batch in run.batches():
            losses.append(run.step(batch))
            edges += int(batch.num_edges)
        return edges, losses

    clock = CASES.clocked(epoch, dev)
    edges, losses = clock.value
    CASES.check_losses(losses, "this epoch", 1)
    return clock.wall, edges

