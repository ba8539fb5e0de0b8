"""Time to accuracy: how soon each variant's validation accuracy reaches a
fixed target on a graph (DAWNBench's time-to-accuracy), its one-off work
(the build: pre-sampling, partition, receptive field; the compile, cold)
counted once at the start, evaluation off the clock
(:func:`gnnperf.measure.runner.train_to_target`). Higher is worse: a faster
epoch that needs more epochs, or a change that slows convergence, raises it.
A variant that does not reach the target within the budget is n/a with its
best accuracy, never a time."""
from __future__ import annotations

import itertools

from . import base, caches, compat, suite
from .profiles import PROFILE, VARIANTS

# No module-level name here starts with time_, track_, peakmem_ or mem_: asv
# would take it for a benchmark.

#: The validation accuracy each graph's variants are timed to: under what
#: GCN reaches there (Cora: 0.79-0.81 at best in 200 epochs), fixed so that
#: a commit cannot move its own target.
TARGETS = {"cora": 0.75, "citeseer": 0.65}
#: The training budget: a variant still short of the target then is n/a.
EPOCHS = 200


def seconds_to_target(graphs: dict, dataset: str, variant: str) -> dict:
    """Seconds (and epochs) of :obj:`variant` to :data:`TARGETS` on
    :obj:`dataset`, or ``{"n/a": reason}`` where it is not reached."""
    train_to_target = compat.gnnperf_name("measure.runner.train_to_target")
    graph = compat.gnnperf_name("data.Dataset")(caches.dataset(graphs, dataset), name=dataset)
    target = TARGETS[dataset]
    with suite.unavailable_as_na():
        curve = train_to_target(compat.variant(variant), graph,
                                compat.train_config(epochs=EPOCHS), suite.device(), target)
    hit = curve.reached(target)
    if hit is None:
        return {"n/a": f"not reached: best validation accuracy {curve.best_val:.3f} < "
                       f"{target} in {len(curve.val_acc)} epochs"}
    return {"seconds": hit.seconds, "epochs": hit.epoch}


def accuracy_race_cache(self):
    """``setup_cache`` of :class:`TimeToAccuracy`: every pair trained to its
    target once per ``asv run``, in this one process (a forked child per
    pair would warm torch up again)."""
    graphs = caches.training_datasets_cache(self)
    suite.set_threads()
    return {params: suite.measured_or_reason(seconds_to_target, graphs, *params)
            for params in itertools.product(*TimeToAccuracy.params)}


# A hang guard: room for every pair's budget and two cold compiles per graph.
accuracy_race_cache.timeout = (60 * len(VARIANTS) + 300) * len(PROFILE.accuracy_datasets)


class TimeToAccuracy(base.CachedFigures):
    """Seconds to the target validation accuracy per (graph, variant)."""
    params = [[d for d in PROFILE.accuracy_datasets if d in TARGETS] or ["cora"], VARIANTS]
    param_names = ["dataset", "variant"]
    setup_cache = accuracy_race_cache

    def track_time_to_accuracy_s(self, cache, dataset, variant):
        return self.figure("seconds")

    track_time_to_accuracy_s.unit = "seconds"
