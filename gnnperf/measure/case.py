"""One notion of a benchmark case, and one way to build, warm and fix its batch.

A :class:`Case` names what is measured: a variant, a dataset, training
overrides, a device and a thread count. :func:`prepare` builds it, trains the
warm-up epochs (optimiser state created, compilation done) and keeps the
batches the measured steps use, so sampling stays out of the step. It is what
``measure``'s work counts, the A/B gate and ``gnnperf bisect``, the
pytest-benchmark suite, the asv suite and ``tools/callgrind_step.py`` all step.

It is also the package's one instrument of time and of the collector:
:func:`synchronize` and :func:`clocked` (the clock every timed figure is
read from), :meth:`PreparedCase.timed_steps` (the one step timer: the
runner's epochs, the gate's time workers, the asv suite and its fast-path
ratios time with it), :func:`check_losses` (the one finite check, raising
``gnnperf.errors.NonFiniteLoss``) and the collector's tuning
(:func:`freeze_collector`, :func:`collector_skips_existing`,
:func:`freeze_before_forks`).

This module depends only on the stable variant API
(:func:`gnnperf.variants.get_variant`, ``TrainConfig``, ``TrainingRun.batches``
and ``.step``) and imports it lazily: the gate's workers and the asv suite
load this file from the tree under test by path and use it on older
checkouts of gnnperf. Loaded so, it loads its sibling ``errors.py`` by path
too (under the name its loader gives the siblings: ``_gnnperf_gate_errors``
beside ``_gnnperf_gate_case``).
"""
from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch


def _errors_module():
    """``gnnperf.errors`` when this file is imported as part of the package;
    else (loaded by path) the ``errors.py`` of the same ``gnnperf`` folder,
    loaded by path under its loader's prefix (or the one it loaded)."""
    if __package__:
        from gnnperf import errors
        return errors
    name = __name__.rpartition("_")[0] + "_errors"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).resolve().parents[1] / "errors.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


NonFiniteLoss = _errors_module().NonFiniteLoss

#: The gate's and the pytest benchmarks' graphs: the tutorial's Cora and a
#: 10k-node synthetic graph (sampling has work to do there).
DEFAULT_DATASETS = ("cora", "synthetic-10k")
#: gnnperf.models.DEFAULT_MODEL, spelled here: this module runs on other
#: checkouts' gnnperf, some from before models were an axis (GCN alone).
DEFAULT_MODEL = "gcn"
_USER_MODEL = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def built_in_models() -> tuple[str, ...]:
    """The model registry's names (``gnnperf.models.MODELS``, read when
    asked, so a model added there is a model here); GCN alone in a checkout
    before the registry."""
    try:
        from gnnperf.models import MODELS
    except ImportError:
        return (DEFAULT_MODEL,)
    return tuple(MODELS)


def _reads_as_model(text: str) -> bool:
    return text.lower() in built_in_models() or bool(_USER_MODEL.match(text))


def _reads_as_path(text: str) -> bool:
    """A graph file's path (an ``@`` may follow inside it), not a dataset name."""
    return "/" in text or text.endswith(".pt")


@dataclass(frozen=True)
class Case:
    r"""A benchmark case.

    Args:
        variant (str): Registry name (``baseline`` or techniques joined by ``+``).
        dataset (str): Any name :func:`gnnperf.data.load_dataset` takes.
        config (tuple): ``TrainConfig`` overrides as sorted ``(name, value)``
            pairs; empty for the defaults. The model is one (``model``),
            absent for the default GCN, so GCN cases read as on checkouts
            before models were an axis.
        device (str): ``cpu``, ``cuda`` or ``cuda:N``.
        threads (int): torch intra-op threads (``None``: leave as is). The
            work counts of some parallel kernels' scratch buffers depend on it.
        warmup_epochs (int): Epochs trained before the measured steps.
    """
    variant: str
    dataset: str
    config: tuple[tuple[str, Any], ...] = ()
    device: str = "cpu"
    threads: int | None = 1
    warmup_epochs: int = 2

    @classmethod
    def parse(cls, text: str, **fields: Any) -> "Case":
        """``variant@dataset`` or ``variant@dataset@model`` (the gate's and
        bisect's spelling). A last ``@`` part is the model only when it reads
        as one (a built-in name or ``module:function``): a graph file's path
        may hold an ``@`` too."""
        variant, sep, rest = (part.strip() for part in text.partition("@"))
        dataset, model = rest, DEFAULT_MODEL
        head, at, tail = (part.strip() for part in rest.rpartition("@"))
        if at and _reads_as_model(tail):
            dataset, model = head, tail
        elif at and (not tail or not _reads_as_path(head)):
            raise ValueError(f"benchmark case {text!r}: {tail!r} is neither a model "
                             f"({', '.join(built_in_models())} or module:function) nor part "
                             f"of a graph file's path")
        if not sep or not variant or not dataset:
            raise ValueError(f"benchmark case {text!r}: write variant@dataset or "
                             f"variant@dataset@model, e.g. baseline@cora or sampled@cora@sage")
        return cls.of(variant, dataset, model, **fields)

    @classmethod
    def of(cls, variant: str, dataset: str, model: str = "gcn", **fields: Any) -> "Case":
        """A case of :obj:`model` (no ``model`` override for the default; a
        built-in model's name in lower case, as the registry spells it)."""
        config = dict(fields.pop("config", ()))
        lower = model.strip().lower()
        model = lower if lower in built_in_models() else model
        if model != DEFAULT_MODEL:
            config["model"] = model
        return cls(variant, dataset, tuple(sorted(config.items())), **fields)

    @property
    def model(self) -> str:
        return dict(self.config).get("model", DEFAULT_MODEL)

    @property
    def name(self) -> str:
        model = "" if self.model == DEFAULT_MODEL else f"@{self.model}"
        return f"{self.variant}@{self.dataset}{model}"

    def to_json(self) -> str:
        return json.dumps({"variant": self.variant, "dataset": self.dataset,
                           "config": dict(self.config), "device": self.device,
                           "threads": self.threads, "warmup_epochs": self.warmup_epochs})

    @classmethod
    def from_json(cls, text: str) -> "Case":
        doc = json.loads(text)
        config = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["config"].items()}
        return cls(doc["variant"], doc["dataset"], tuple(sorted(config.items())),
                   doc["device"], doc["threads"], doc["warmup_epochs"])


def default_cases(variants: list[str], datasets: tuple[str, ...] = DEFAULT_DATASETS,
                  models: tuple[str, ...] = (DEFAULT_MODEL,), **fields: Any) -> list[Case]:
    """Every variant of every model on every dataset, dataset-major, then
    model (the gate's order)."""
    return [Case.of(v, d, m, **fields) for d in datasets for m in models for v in variants]


def check_losses(losses: list, what: str, first_step: int, steps_per_loss: int = 1) -> float:
    """The mean of :obj:`losses` (one host sync for all of them), or
    :class:`NonFiniteLoss` naming the first step (the first at
    :obj:`first_step`, counted from 1) whose loss is not finite. With
    :obj:`steps_per_loss` > 1 each loss is the last of a block of steps, and
    the block is named. The one finite check: every timed figure passes it
    after its clock stops."""
    if not losses:
        return math.nan
    stacked = torch.stack([loss.detach().float().reshape(()) for loss in losses])
    mean = float(stacked.mean())
    if math.isfinite(mean):  # finite exactly when every loss is (or one overflowed the sum)
        return mean
    finite = torch.isfinite(stacked)
    if bool(finite.all()):
        return mean
    index = int((~finite).nonzero()[0])
    start = first_step + index * steps_per_loss
    where = (f"step {start}" if steps_per_loss == 1 else
             f"steps {start}-{start + steps_per_loss - 1} (a block checked at its end)")
    raise NonFiniteLoss(f"{what}: non-finite loss ({float(stacked[index])}) in {where}; its "
                        f"numerics broke (check the inputs, the learning rate and the "
                        f"technique), so nothing of it is measured")


# The clock ----------------------------------------------------------------------
def synchronize(device: torch.device) -> None:
    """Waits for queued kernels so wall-clock time covers their execution."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Clocked:
    """What :func:`clocked` read: wall and process CPU seconds, and what the
    timed call returned."""
    wall: float
    cpu: float
    value: Any = None


def clocked(fn: Callable[[], Any], device: torch.device) -> Clocked:
    """Wall-clock and process CPU seconds of :obj:`fn`, the device work it
    queued included (synchronised before and after): the one clock."""
    synchronize(device)
    start, start_cpu = time.perf_counter(), time.process_time()
    value = fn()
    synchronize(device)
    cpu = time.process_time() - start_cpu
    return Clocked(time.perf_counter() - start, cpu, value)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of :obj:`fn` (:func:`clocked`)."""
    return clocked(fn, device).wall


# The collector ------------------------------------------------------------------
# A full collection walks every tracked object, and torch's import alone
# leaves hundreds of thousands: frozen objects are skipped, so a measured
# step never pays for walking the set-up's objects. What a step drops is
# still collected.
def freeze_collector() -> None:
    """Collects, then freezes (``gc.freeze``) every object alive: the
    collector's full passes from here on walk only what is made later."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def collector_skips_existing() -> Iterator[None]:
    """:func:`freeze_collector` for the block, unfrozen after it; a caller
    that froze objects of its own keeps them so (nothing is unfrozen)."""
    if gc.get_freeze_count():
        yield
        return
    freeze_collector()
    try:
        yield
    finally:
        gc.unfreeze()


def freeze_before_forks() -> None:
    """For a process that forks the measured ones (asv's forkserver):
    collects once and freezes every object alive before each fork
    (CPython's advice before forking without exec), so a child's
    collections skip its parent's objects."""
    gc.collect()
    os.register_at_fork(before=gc.freeze)


@dataclass
class PreparedCase:
    """A built, warmed-up training run and the batches its measured steps
    cycle through (one, when fixed)."""
    case: Case
    run: Any  # gnnperf.variants.TrainingRun
    batches: list
    graphs_after_first_epoch: int | None = None
    recompiles: int | None = None
    cursor: int = field(default=0, repr=False)
    warmup_steps: int = 0
    last_loss: Any = field(default=None, repr=False)  # the latest step's, unchecked
    # Device bytes allocated before the build (CUDA; None where not taken):
    # what a device peak of its steps is reported above (the asv suite's).
    held_bytes: int | None = None

    @property
    def steps_done(self) -> int:
        """Training steps so far, warm-up included (counted off the clock)."""
        return self.warmup_steps + self.cursor

    @property
    def variant(self) -> str:
        return self.case.variant

    @property
    def dataset(self) -> str:
        return self.case.dataset

    def step(self):
        """One training step on the next prepared batch (not synchronised:
        see :meth:`synced_step`); returns its loss, unchecked (a check is a
        host sync: see :meth:`check_loss`)."""
        batch = self.batches[self.cursor % len(self.batches)]
        self.cursor += 1
        self.last_loss = self.run.step(batch)
        return self.last_loss

    def synced_step(self):
        """:meth:`step`, then waits for the GPU work it queued."""
        loss = self.step()
        synchronize(self.run.device)
        return loss

    def timed_steps(self, steps: int = 1) -> Clocked:
        """The one step timer: :obj:`steps` synchronised steps on the
        :func:`clocked` clock, their loss checked after it stops
        (:class:`NonFiniteLoss`: no time of NaN arithmetic); wall and CPU
        seconds per step, and the last loss."""
        def run_steps():
            for _ in range(steps):
                self.synced_step()

        block = clocked(run_steps, self.run.device)
        self.check_loss(self.last_loss, steps)
        return Clocked(block.wall / steps, block.cpu / steps, self.last_loss)

    def check_loss(self, loss, steps: int = 1) -> None:
        """:class:`NonFiniteLoss` if :obj:`loss`, the latest step's, is not
        finite (call it off the clock: it syncs); :obj:`steps` is the block
        it ends, named in the error. A NaN parameter stays NaN under Adam, so
        checking a block's last loss sees a NaN anywhere in it."""
        check_losses([loss], self.case.name, self.steps_done - steps + 1, steps)


def build(case: Case, data=None):
    """The case's :class:`TrainingRun`, on a clean Dynamo cache (a variant
    compiled earlier in the process would otherwise reuse its graphs), with
    the case's threads set; :obj:`data` is loaded when not given."""
    from gnnperf.variants import TrainConfig, get_variant

    if case.threads is not None and torch.get_num_threads() != case.threads:
        torch.set_num_threads(case.threads)
    if data is None:
        from gnnperf.data import load_dataset
        data = load_dataset(case.dataset)
    spec = get_variant(case.variant)
    reset = getattr(getattr(torch, "compiler", None), "reset", None)
    if reset is not None:
        reset()
    return spec.build(graph_of(data), TrainConfig(**dict(case.config)), torch.device(case.device))


def graph_of(loaded):
    """The PyG graph of what a tree's ``load_dataset`` returned: a
    ``Dataset`` record's ``graph``, or (checkouts before the record) the
    ``Data`` itself."""
    return getattr(loaded, "graph", loaded)


def prepare(case: Case, data=None, fixed_batch: bool = True) -> PreparedCase:
    """Builds :obj:`case`, trains its warm-up epochs (none: the first
    steps, compilation included, are what is measured), then
    keeps the next epoch's batches: its first only when :obj:`fixed_batch`
    (exact work counts and A/B timing step on one batch), all of them
    otherwise (asv cycles through an epoch). ``recompiles`` counts graphs
    compiled after the first epoch."""
    run = build(case, data)
    counter = getattr(run, "compile_counter", None)
    graphs_after_first = None
    losses = []
    for epoch in range(case.warmup_epochs):
        for batch in run.batches():
            losses.append(run.step(batch))
        if epoch == 0 and counter is not None:
            graphs_after_first = counter.graphs
    check_losses(losses, case.name, 1)
    batches = []
    for batch in run.batches():
        batches.append(batch)
        if fixed_batch:
            break
    recompiles = None
    if counter is not None and graphs_after_first is not None:
        recompiles = counter.graphs - graphs_after_first
    return PreparedCase(case, run, batches, graphs_after_first, recompiles,
                        warmup_steps=len(losses))


__all__ = ["Case", "Clocked", "DEFAULT_DATASETS", "DEFAULT_MODEL", "NonFiniteLoss", "PreparedCase",
           "build", "built_in_models", "check_losses", "clocked", "collector_skips_existing",
           "default_cases", "freeze_before_forks", "freeze_collector", "graph_of", "prepare",
           "synchronize", "timed"]
