"""The variant registry: a variant is ``baseline`` or techniques joined by
``+`` (``sampled+amp+compiled``). A new technique is one :class:`Technique`
subclass and one line in :data:`TECHNIQUES`."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from gnnperf.errors import GnnperfError, UnknownVariant
from gnnperf.models import MODELS, ModelSpec, get_model
from gnnperf.ranks import ShardPolicy, current_shard
from gnnperf.variants.amp import Amp
from gnnperf.variants.base import Batch, Technique, TrainConfig, TrainingRun, seed_generators
from gnnperf.variants.checkpointed import Checkpointed
from gnnperf.variants.cluster import Cluster
from gnnperf.variants.compiled import Compiled
from gnnperf.variants.lr_boost import LrBoost
from gnnperf.variants.ddp import Ddp
from gnnperf.variants.offload import Offload
from gnnperf.variants.saint import Saint
from gnnperf.variants.sampled import Sampled
from gnnperf.variants.sparse import Sparse
from gnnperf.variants.sparse_features import SparseFeaturesTechnique
from gnnperf.variants.trimmed import Trimmed
from gnnperf.variants.tutorial import Tutorial

TECHNIQUES: dict[str, type[Technique]] = {
    technique.name: technique
    for technique in (Sampled, Amp, Compiled, Checkpointed, Sparse, Trimmed, Saint, Cluster,
                      Offload, Ddp, SparseFeaturesTechnique, LrBoost, Tutorial)
}
BASELINE = "baseline"
#: Combinations the comparison shows after the techniques alone: the fastest
#: Cora configuration (sparse features and adjacency, trimmed to the training
#: nodes' receptive field), eager and compiled, and eager with the boosted
#: learning rate (the fewest epochs to a target at the fastest epoch).
COMBINED_VARIANTS = ("sparse+trimmed+sparse_features", "sparse+trimmed+sparse_features+compiled",
                     "sparse+trimmed+sparse_features+lr_boost")


def standard_variants() -> list[str]:
    """The comparison's variants: the baseline, each registered technique
    alone (in its :attr:`~Technique.standard_variant` form), then
    :data:`COMBINED_VARIANTS`."""
    return [BASELINE, *(technique.standard_variant() for technique in TECHNIQUES.values()
                        if technique.in_comparison), *COMBINED_VARIANTS]


def step_variants() -> list[str]:
    """The standard variants whose steps differ: those of
    :func:`standard_variants` without a technique that leaves the step as
    it is (:attr:`~Technique.changes_step`), what the gate and the asv
    suite time."""
    return [name for name in standard_variants()
            if all(t.changes_step for t in get_variant(name).techniques)]


def reference_variant(name: str) -> str:
    """What :obj:`name` is compared with: the same variant without its last
    technique in application order (``sampled+trimmed`` -> ``sampled``,
    ``sparse+checkpointed`` -> ``sparse``, ``sparse`` -> ``baseline``)."""
    techniques = get_variant(name).techniques
    return "+".join(t.name for t in techniques[:-1]) or BASELINE


@dataclass(frozen=True, eq=False)
class Variant:
    """A set of techniques with its canonical name, parsed once by
    :func:`get_variant`; two parses of one name are equal (and hash alike)."""
    techniques: tuple[Technique, ...]

    @property
    def name(self) -> str:
        return "+".join(t.name for t in self.techniques) or BASELINE

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Variant) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def uses(self, technique: str) -> bool:
        """Whether :obj:`technique` (a registry name) is one of this variant's."""
        return any(t.name == technique for t in self.techniques)

    @property
    def data_parallel(self) -> bool:
        """Whether its ranks share the training work (ddp)."""
        return any(t.data_parallel for t in self.techniques)

    @property
    def minibatch(self) -> bool:
        """Whether its steps train on sampled subgraphs rather than the full graph."""
        return any(t.makes_batches for t in self.techniques)

    def cannot_run_with(self, model: ModelSpec) -> str | None:
        """Why this variant cannot train :obj:`model`, in one line naming
        the fix, or None when it can."""
        for technique in self.techniques:
            for capability in technique.needs_model:
                if not model.has(capability):
                    able = ", ".join(m for m, spec in MODELS.items() if spec.has(capability))
                    fix = (f"drop {technique.name} from {self.name}, or train a model it runs "
                           f"with ({able})" if len(self.techniques) > 1
                           else f"it runs with {able}")
                    return (f"{technique.name} cannot run with model {model.name}: "
                            f"{model.why_not(capability)}; {fix}")
        return None

    def build(self, data: Data, config: TrainConfig, device: torch.device) -> TrainingRun:
        """A training run for this variant on graph :obj:`data` (a PyG
        ``Data``: a :class:`~gnnperf.data.Dataset`'s ``graph``), seeded by
        :obj:`config.seed`."""
        if not isinstance(data, Data):
            raise TypeError(f"Variant.build takes a PyG Data graph (a Dataset's .graph), not a "
                            f"{type(data).__name__}")
        reason = self.cannot_run_with(get_model(config.model))
        if reason:
            raise GnnperfError(reason)
        seed_generators(config.seed, torch.device(device))
        on_host = any(t.keeps_data_on_host for t in self.techniques)
        run = TrainingRun(data, config, device,
                          data_device=torch.device("cpu") if on_host else device)
        run.variant = self
        if self.data_parallel:
            run.shards = ShardPolicy(current_shard())
            run.train_nodes = run.shards.train_nodes(run.train_nodes)
        for technique in self.techniques:
            technique.apply(run)
        return run


def model_pairs(variants: list[Variant], models: list[str], named: bool = False
                ) -> tuple[list[tuple[str, Variant]], dict[tuple[str, str], str]]:
    """Each (model, variant) pair that can train, model-major, and for each
    that cannot, ``(variant name, model) -> why`` (:meth:`Variant.cannot_run_with`).
    With :obj:`named` (the variants were asked for by name), one that runs
    with none of :obj:`models` is a :class:`GnnperfError` instead."""
    cannot = {}
    for variant in variants:
        reasons = {model: variant.cannot_run_with(get_model(model)) for model in models}
        if named and all(reasons.values()):
            raise GnnperfError(next(iter(reasons.values())))
        cannot.update({(variant.name, model): why for model, why in reasons.items() if why})
    runs = [(model, variant) for model in models for variant in variants
            if (variant.name, model) not in cannot]
    return runs, cannot


def get_variant(name: str) -> Variant:
    """Parses ``baseline`` or ``technique[+technique...]`` (any order)."""
    parts = [p.strip().lower() for p in name.split("+") if p.strip()]
    if parts == [BASELINE]:
        return Variant(())
    unknown = [p for p in parts if p not in TECHNIQUES]
    if not parts or unknown:
        raise UnknownVariant(
            f"unknown variant {name!r}; choose baseline or techniques from "
            f"{', '.join(TECHNIQUES)} joined by + (e.g. sampled+amp)")
    if len(set(parts)) != len(parts):
        raise GnnperfError(f"variant {name!r} repeats a technique")
    for part in parts:
        missing = [need for need in TECHNIQUES[part].requires if need not in parts]
        if missing:
            raise GnnperfError(f"{part} needs {'+'.join(missing)}: use "
                               f"{TECHNIQUES[part].standard_variant()} (variant {name!r})")
    alone = [p for p in parts if not TECHNIQUES[p].combines]
    if alone and len(parts) > 1:
        raise GnnperfError(f"{alone[0]} is a reference and combines with no technique; "
                           f"run it as its own variant (variant {name!r})")
    batch_makers = [p for p in parts if TECHNIQUES[p].makes_batches]
    if len(batch_makers) > 1:
        raise GnnperfError(f"variant {name!r} combines {' and '.join(batch_makers)}, which each "
                           f"build the batches; use one of them")
    for part in parts:
        allowed = TECHNIQUES[part].allowed_batch_makers
        other = [b for b in batch_makers if allowed is not None and b not in allowed]
        if other:
            raise GnnperfError(f"{part} works on the full graph or {' or '.join(allowed)} "
                               f"batches, not {other[0]}'s subgraphs: use {part} or "
                               f"{allowed[0]}+{part} (variant {name!r})")
        if TECHNIQUES[part].needs_batches and not batch_makers:
            raise GnnperfError(f"{part} moves mini-batches, so it needs one of "
                               f"{', '.join(t for t in TECHNIQUES if TECHNIQUES[t].makes_batches)}: "
                               f"use {TECHNIQUES[part].standard_variant()} (variant {name!r})")
    ordered = sorted(parts, key=lambda p: (TECHNIQUES[p].order, p))
    return Variant(tuple(TECHNIQUES[p]() for p in ordered))


__all__ = ["Batch", "COMBINED_VARIANTS", "Technique", "TrainConfig", "TrainingRun", "Variant",
           "TECHNIQUES",
           "BASELINE", "get_variant", "model_pairs", "reference_variant",
           "standard_variants", "step_variants"]
