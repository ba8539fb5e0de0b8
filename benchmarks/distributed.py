"""Data-parallel training (ddp): epoch time per step across ranks and the
strong-scaling overhead against one rank, for world sizes [1, 2] on CPU and
[1, all GPUs] on CUDA runners; n/a where the machine cannot run the world
size. Ranks are real processes (PyTorch's elastic launcher, loopback), so
each (variant, world size) is measured once per ``asv run`` in
``setup_cache`` and the figures are tracked."""
from __future__ import annotations

import os

import torch

from . import base, compat, profiles, suite
from .profiles import PROFILE

DATASET = PROFILE.datasets[0]
# Quick: the 3 warm-up epochs and one timed (the ranks' start is most of a
# measurement either way).
EPOCHS = 4 if PROFILE.name == "quick" else 50


def world_sizes() -> list[int]:
    if suite.device().type == "cuda":
        return sorted({1, torch.cuda.device_count()})
    return [1, 2]


def _fits(world: int) -> str:
    """Why this machine cannot run :obj:`world` ranks ("" when it can)."""
    if suite.device().type == "cuda":
        return "" if torch.cuda.device_count() >= world else f"fewer than {world} GPUs"
    return "" if (os.cpu_count() or 1) >= world else f"fewer than {world} CPU cores"


def scaling_cache(self):
    """Every variant on one rank, then on each larger world (efficiency
    against that one-rank epoch): one launch per world for all variants
    (a launch is most of a quick measurement), one per variant where that
    fails (``measure_each_data_parallel``), so a failing variant fails only
    its own figures."""
    try:
        single = compat.gnnperf_name("distributed.measure_data_parallel")
    except NotImplementedError as exc:
        return {"n/a": str(exc)}
    try:
        each = compat.gnnperf_name("distributed.measure_each_data_parallel")
    except NotImplementedError:  # an older commit: a launch per variant
        each = None
    names, figures, one = DataParallel.params[0], {}, {}
    try:  # the launcher takes the loaded graph and the parsed variants...
        compat.gnnperf_name("data.Dataset")
        where, parse = (compat.gnnperf_name("data.load_dataset")(DATASET),), compat.variant
    except NotImplementedError:  # ...or, on commits before the Dataset record, names
        where, parse = (DATASET, None), str
    named = {}  # variant as the launcher takes it -> its name here
    for name in names:
        try:
            named[parse(name)] = name
        except NotImplementedError as exc:  # a variant this commit lacks
            figures.update({f"{name}|{world}": {"n/a": str(exc)}
                            for world in DataParallel.params[1]})
    variants = list(named)
    launch_args = (*where, compat.train_config(epochs=EPOCHS), str(suite.device()), 3,
                   suite.THREADS, "auto")
    for world in DataParallel.params[1]:
        if _fits(world):
            figures.update({f"{name}|{world}": {"n/a": _fits(world)} for name in named.values()})
            continue
        if not variants:
            continue
        reference = dict(one) if world > 1 else None
        if each is not None:
            found = suite.measured_or_reason(lambda: {"results": each(
                variants, world, *launch_args, one_rank_epoch_s=reference)})
            outcomes = ({variant: _outcome(value) for variant, value in found["results"].items()}
                        if "results" in found else {variant: found for variant in variants})
        else:
            outcomes = {variant: suite.measured_or_reason(lambda: {"result": single(
                variant, world, *launch_args, one_rank_epoch_s=one.get(variant))})
                for variant in variants}
        for variant, outcome in outcomes.items():
            key = f"{named[variant]}|{world}"
            if "result" not in outcome:  # a rank failed (error) or cannot here (n/a)
                figures[key] = outcome
                continue
            result = outcome["result"]
            if world == 1:
                one[variant] = result.epoch_time.median
            figures[key] = {
                "step_ms": result.epoch_time.median * 1e3 / max(result.steps_per_epoch, 1),
                "efficiency": result.extra["scaling_efficiency"]}
    return figures


def _outcome(value) -> dict:
    """One variant's result, or the error it failed with as n/a (declared) or error."""
    if isinstance(value, Exception):
        kind = "n/a" if suite.declared_na(value) else "error"
        return {kind: f"{type(value).__name__}: {value}"}
    return {"result": value}


scaling_cache.timeout = 1800


class DataParallel(base.CachedFigures):
    """``ddp`` (full batch) and ``sampled+ddp`` across local ranks."""
    params = [profiles.variants_with("ddp", ("ddp", "sampled+ddp")), world_sizes()]
    param_names = ["variant", "world_size"]
    setup_cache = scaling_cache
    # How the ranks are launched is part of the figure: raise the version
    # when it changes.
    version = "1"
    timeout = 1800

    def figure_key(self, variant, world_size):
        return f"{variant}|{world_size}"

    def track_step_ms(self, cache, variant, world_size):
        """Epoch time of the slowest rank per step, in ms (ranks step together)."""
        return self.figure("step_ms")

    track_step_ms.unit = "ms"

    def track_scaling_overhead_pct(self, cache, variant, world_size):
        """100 * (1 - strong-scaling efficiency): 0 for perfect scaling, higher is worse."""
        return 100.0 * (1.0 - self.figure("efficiency"))

    track_scaling_overhead_pct.unit = "%"
