"""What every variant shares: the training configuration, the training run
that techniques reshape, and the technique interface."""
from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from typing import Callable, ClassVar, ContextManager, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

from gnnperf.ranks import Shard, ShardPolicy
from gnnperf.errors import GnnperfError
from gnnperf.models import (BLOCKS, DEFAULT_MODEL, FIXED_AGGREGATION, BlockGNN, LayerGraph,
                            ModelSpec, SparseAdjacency, SparseFeatures, get_model)


AMP_DTYPES = ("auto", "bf16", "fp16")


@dataclass
class TrainConfig:
    r"""Hyper-parameters of a training run (the PyG GCN tutorial's by default).

    Args:
        model (str): The model (:func:`gnnperf.models.get_model`): ``gcn``,
            ``sage``, ``gat``, ``gin`` or ``module:callable``.
        epochs (int): Training epochs, warm-up included.
        hidden (int): Hidden width.
        layers (int): Number of GCN layers.
        dropout (float): Dropout probability.
        lr (float): Adam learning rate.
        weight_decay (float): Adam weight decay.
        fanout (tuple[int, ...]): Neighbours sampled per hop (sampled
            variants); the last entry repeats for deeper models.
        batch_size (int): Seed nodes per mini-batch (sampled variants).
        sampler (str): ``auto``, ``native`` or ``vectorized``.
        saint_roots (int, optional): GraphSAINT random walks (roots) per
            batch (default: :obj:`max(500, ceil(num_nodes / 5))`).
        saint_walk_length (int): Steps per GraphSAINT walk.
        saint_coverage (float): GraphSAINT pre-sampling: subgraphs until
            this many times num_nodes nodes were drawn (PyG's
            ``sample_coverage``); the least pre-sampling.
        saint_norm (str): GraphSAINT aggregation normalisation: ``paper``
            (Zeng et al.: :math:`C_v / C_{uv}`, :math:`v` the aggregating
            node) or ``pyg`` (PyG's :math:`C_u / C_{uv}`, :math:`u` the source).
        saint_seen_edges (float): GraphSAINT pre-sampling goes on past
            :obj:`saint_coverage` until this share of the edges was drawn...
        saint_min_count (int): ...at least this many times each...
        saint_max_coverage (float): ...or this many times num_nodes nodes were.
        cluster_parts (int): Cluster-GCN METIS parts.
        cluster_batch (int): Cluster-GCN parts per batch.
        amp_dtype (str): ``amp``: ``auto`` (bf16 where native, else fp16
            with a gradient scaler), ``bf16`` or ``fp16`` (with the scaler).
        seed (int): Seed of model, dropout, shuffling and sampling.
    """
    epochs: int = 200
    model: str = DEFAULT_MODEL
    hidden: int = 16
    layers: int = 2
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    fanout: tuple[int, ...] = (15, 10)
    batch_size: int = 128
    sampler: str = "auto"
    # Roots: N / 5, at least 500: the estimator's variance falls as the
    # subgraphs grow, and at N / 5 it learns as well as Cluster-GCN at the
    # same epochs on synthetic-1m and CiteSeer, where N / 15 (PyG's Flickr
    # example's ratio) trails by points (docs/results.md, "GraphSAINT's
    # subgraph size against Cluster-GCN").
    saint_roots: int | None = None
    saint_walk_length: int = 2
    saint_coverage: float = 20.0
    # A fixed coverage leaves edges never or seldom drawn on large graphs:
    # C_v / C_uv is then noisy and biased up (Jensen), which costs accuracy.
    # So pre-sampling goes on until saint_seen_edges of the edges were drawn
    # saint_min_count times, capped at saint_max_coverage.
    saint_norm: str = "paper"
    saint_seen_edges: float = 0.99
    saint_min_count: int = 10
    saint_max_coverage: float = 200.0
    cluster_parts: int = 32
    cluster_batch: int = 4
    amp_dtype: str = "auto"
    seed: int = 0

    def validate(self) -> None:
        get_model(self.model)  # an unknown name or an import path that fails: named
        if self.epochs < 1:
            raise GnnperfError(f"epochs must be >= 1, got {self.epochs}")
        if self.hidden < 1 or self.layers < 1:
            raise GnnperfError(f"hidden and layers must be >= 1, got {self.hidden}, {self.layers}")
        if self.batch_size < 1:
            raise GnnperfError(f"batch size must be >= 1, got {self.batch_size}")
        if not self.fanout or any(k == 0 or k < -1 for k in self.fanout):
            raise GnnperfError(f"fanout {list(self.fanout)} is invalid; use positive sizes "
                               f"per hop such as 15,10 (or -1 for all neighbours)")
        if self.lr <= 0:
            raise GnnperfError(f"learning rate must be > 0, got {self.lr}")
        if not 0.0 <= self.dropout < 1.0:
            raise GnnperfError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.weight_decay < 0:
            raise GnnperfError(f"weight decay must be >= 0, got {self.weight_decay}")
        if (self.saint_roots is not None and self.saint_roots < 1) or \
                self.saint_walk_length < 0 or not self.saint_coverage > 0:
            raise GnnperfError(f"GraphSAINT needs --saint-roots >= 1, --saint-walk-length >= 0 "
                               f"and --saint-coverage > 0, got {self.saint_roots}, "
                               f"{self.saint_walk_length}, {self.saint_coverage}")
        from gnnperf.sampling.subgraph import SAINT_NORMS
        if self.saint_norm not in SAINT_NORMS:
            raise GnnperfError(f"--saint-norm must be one of {', '.join(SAINT_NORMS)}, "
                               f"got {self.saint_norm!r}")
        if not 0.0 <= self.saint_seen_edges <= 1.0:
            raise GnnperfError(f"--saint-seen-edges must be in [0, 1], got {self.saint_seen_edges}")
        if self.saint_min_count < 1:
            raise GnnperfError(f"--saint-min-count must be >= 1, got {self.saint_min_count}")
        if not self.saint_max_coverage >= self.saint_coverage:
            raise GnnperfError(f"--saint-max-coverage must be >= --saint-coverage "
                               f"({self.saint_coverage}), got {self.saint_max_coverage}")
        if self.cluster_parts < 1 or self.cluster_batch < 1:
            raise GnnperfError(f"Cluster-GCN needs --cluster-parts >= 1 and --cluster-batch >= 1, "
                               f"got {self.cluster_parts}, {self.cluster_batch}")
        if self.seed < 0:
            raise GnnperfError(f"--seed must be >= 0, got {self.seed}")
        if self.amp_dtype not in AMP_DTYPES:
            raise GnnperfError(f"--amp-dtype must be one of {', '.join(AMP_DTYPES)}, "
                               f"got {self.amp_dtype!r}")

    def saint_roots_for(self, num_nodes: int) -> int:
        """GraphSAINT's roots per batch on a graph of :obj:`num_nodes` nodes."""
        if self.saint_roots is not None:
            return self.saint_roots
        return max(500, math.ceil(num_nodes / 5))

    def fanout_per_layer(self) -> list[int]:
        return [self.fanout[min(i, len(self.fanout) - 1)] for i in range(self.layers)]


@dataclass
class Batch:
    """One training step's input: a (sub)graph, normalised, and the nodes that
    carry the loss (the first :obj:`num_seeds` nodes for sampled batches).

    :obj:`graph` / :obj:`edge_weight` are what every layer reads, unless
    :obj:`layers` gives one graph per layer. :obj:`loss_weight` (one per loss
    node) turns the mean loss into a weighted sum (GraphSAINT's normalisation);
    :obj:`num_sampled_nodes` holds a neighbor-sampled batch's nodes per hop
    (seeds first), what trimming needs.
    """
    x: Tensor
    graph: Tensor
    edge_weight: Tensor | None
    y: Tensor
    loss_nodes: Tensor | slice
    num_seeds: int
    num_edges: int
    layers: list[LayerGraph] | None = None
    loss_weight: Tensor | None = None
    num_sampled_nodes: list[int] | None = None


GraphTransform = Callable[[Tensor, "Tensor | None", int, int], tuple[Tensor, "Tensor | None"]]


def _keep_edge_index(edge_index: Tensor, edge_weight: Tensor | None, num_targets: int,
                     num_sources: int) -> tuple[Tensor, Tensor | None]:
    return edge_index, edge_weight


def _rows(tensor: Tensor, index: Tensor | slice) -> Tensor:
    # A trimmed full batch's output is its loss rows: no slice (and no
    # slice_backward filling zeros) when the index covers the whole tensor.
    if isinstance(index, slice) and index.step in (None, 1) and index.start in (None, 0) \
            and (index.stop is None or index.stop >= tensor.size(0)):
        return tensor
    return tensor[index]


def seed_generators(seed: int, device: torch.device) -> None:
    """Seeds the generators a run on :obj:`device` draws from. A CPU run
    seeds the CPU's alone: ``torch.manual_seed`` seeds every backend's, and
    where CUDA is not initialised it queues CUDA's seed with a formatted
    stack, a fraction of a millisecond in every build and so in time to
    accuracy's clock. The CPU generator's stream is the same either way."""
    if device.type == "cpu":
        torch.default_generator.manual_seed(int(seed))
    else:
        torch.manual_seed(seed)


class TrainingRun:
    r"""A model, its optimiser and its data, shaped by a variant's techniques.

    Techniques replace or wrap the hooks :meth:`batches`,
    :meth:`subgraph_batch`, :attr:`batch_to_device`, :attr:`graph_transform`, :attr:`forward`,
    :attr:`autocast` and :attr:`scaler`; :meth:`step` and :meth:`evaluate`
    stay the same for every variant.
    """

    def __init__(self, data: Data, config: TrainConfig, device: torch.device,
                 data_device: torch.device | None = None) -> None:
        config.validate()
        self.config = config
        self.device = device
        # The graph lives on the training device unless a technique keeps it
        # on the host and moves batches (offload).
        self.data = data.to(data_device or device)
        num_classes = int(data.y.max()) + 1
        #: The model's registry entry: how it wants the graph, what it lacks.
        self.model_spec: ModelSpec = get_model(config.model)
        self.model = self.model_spec.build(data.num_features, config.hidden, num_classes,
                                           config.layers, config.dropout).to(device)
        # Fused Adam: one kernel per step instead of a dozen ops per parameter.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr,
                                          weight_decay=config.weight_decay,
                                          fused=device.type in ("cpu", "cuda"))
        self.forward: Callable[..., Tensor] = self.model
        self.autocast: Callable[[], ContextManager] = contextlib.nullcontext
        self.scaler: torch.amp.GradScaler | None = None
        self.dynamic_shapes = False  # set by techniques whose batches vary in size
        # (edge_index, edge_weight, num_targets, num_sources) -> what a conv reads.
        self.graph_transform: GraphTransform = _keep_edge_index
        self.stats: dict[str, float | int | str] = {}
        # One-off work done before training (METIS partition, GraphSAINT
        # pre-sampling), in seconds: reported apart from steady state.
        self.setup_seconds: dict[str, float] = {}
        self.compile_counter = None  # set by the compiled technique
        # The whole step (forward, backward and optimiser update) as one
        # compiled function of the batch, when the compiled technique could
        # trace it; None: step() runs it eagerly around self.forward.
        self.compiled_step: Callable[[Batch], Tensor] | None = None
        # The variant (set by Variant.build), for techniques that depend on
        # what else it does: ask it (run.variant.minibatch, .techniques).
        self.variant = None
        # A host batch onto the device and finished there, at the start of
        # each step (offload: the copy is part of the step it feeds); None:
        # batches are made on the device.
        self.batch_to_device: Callable[[Batch], Batch] | None = None
        # Called once training ends (before evaluation), e.g. to read CUDA events.
        self.on_finish: list[Callable[[], None]] = []
        self._full_graph: tuple[Tensor, Tensor | None] | None = None
        # What evaluate() reads, built at its first call.
        self._eval_inputs: tuple | None = None
        self._eval_model: torch.nn.Module | None = None
        # Index, not mask: boolean indexing costs a nonzero (a sync on CUDA) per step.
        self.train_nodes = self.data.train_mask.nonzero().view(-1)
        # How the work is split across data-parallel ranks (set by
        # Variant.build for ddp; otherwise nothing is split): every batch
        # maker takes its share through it.
        self.shards = ShardPolicy()

    @property
    def shard(self) -> Shard | None:
        """This rank's place among data-parallel ranks (None: one process
        does all the work)."""
        return self.shards.shard

    def prepare_graph(self, edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor | None]:
        """A (sub)graph as the model reads it (:attr:`ModelSpec.prepare_graph`:
        GCN's normalisation and self-loops, SAGE's mean weights, ...)."""
        return self.model_spec.prepare_graph(edge_index, num_nodes)

    # Hooks -----------------------------------------------------------------
    def full_graph(self) -> tuple[Tensor, Tensor | None]:
        """The whole graph, prepared once (and transformed) for reuse."""
        if self._full_graph is None:
            num_nodes = self.data.num_nodes
            edge_index, edge_weight = self.prepare_graph(self.data.edge_index, num_nodes)
            self._full_graph = self.graph_transform(edge_index, edge_weight, num_nodes, num_nodes)
        return self._full_graph

    def subgraph_batch(self, batch: Batch) -> Batch:
        """Turns a sampled batch holding a normalised :obj:`edge_index` into
        what the model reads; trimming replaces this hook."""
        num_nodes = batch.x.size(0)
        batch.graph, batch.edge_weight = self.graph_transform(
            batch.graph, batch.edge_weight, num_nodes, num_nodes)
        return batch

    def induced_batch(self, nodes: Tensor, edge_index: Tensor, edge_weight: Tensor | None,
                      num_edges: int, loss_nodes: Tensor | None = None,
                      loss_weight: Callable[[Tensor], Tensor] | None = None) -> Batch:
        """The batch of a node-induced subgraph (GraphSAINT, Cluster-GCN):
        the features and labels of :obj:`nodes`, its (local, normalised)
        edges, the loss on its training nodes (:obj:`loss_weight` maps their
        global ids to weights), through :meth:`subgraph_batch`."""
        if loss_nodes is None:
            loss_nodes = self.data.train_mask.index_select(0, nodes).nonzero().view(-1)
        weight = None if loss_weight is None else loss_weight(nodes.index_select(0, loss_nodes))
        return self.subgraph_batch(Batch(
            self.data.x.index_select(0, nodes), edge_index, edge_weight,
            self.data.y.index_select(0, nodes), loss_nodes, num_seeds=loss_nodes.numel(),
            num_edges=num_edges, loss_weight=weight))

    def batches(self) -> Iterable[Batch]:
        """One epoch's batches; the full graph with the training mask by default."""
        graph, edge_weight = self.full_graph()
        yield Batch(self.data.x, graph, edge_weight, self.data.y, self.train_nodes,
                    num_seeds=self.train_nodes.numel(), num_edges=self.data.edge_index.size(1))

    # Fixed parts -------------------------------------------------------------
    def loss(self, batch: Batch) -> Tensor:
        """The training loss of :obj:`batch` (forward and loss under :attr:`autocast`)."""
        with self.autocast():
            if batch.layers is None:
                out = self.forward(batch.x, batch.graph, batch.edge_weight)
            else:
                out = self.forward(batch.x, layers=batch.layers)
            out, y = _rows(out, batch.loss_nodes), _rows(batch.y, batch.loss_nodes)
            if batch.loss_weight is None:
                return F.cross_entropy(out, y)
            return (F.cross_entropy(out, y, reduction="none") * batch.loss_weight).sum()

    def step(self, batch: Batch) -> Tensor:
        """One optimiser step on :obj:`batch`; returns the (detached) loss."""
        if not self.model.training:  # train() visits every submodule
            self.model.train()
        if self.batch_to_device is not None:
            batch = self.batch_to_device(batch)
        if self.compiled_step is not None:
            return self.compiled_step(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()

    @torch.inference_mode()
    def evaluate(self) -> dict[str, float]:
        """Full-graph accuracy of the eager model on the train, validation
        and test masks, in full precision (an ``amp`` run's master weights),
        on the data's device (a copy of the model there when the data stayed
        on the host: the full graph never goes to the device).

        Cheap enough to follow every epoch: what it reads is built at the
        first call and kept (:meth:`release_evaluation` drops it; a
        mini-batch run on an accelerator builds it at every call), forward
        only (no transpose), on the
        fast path's structures where the model allows them: for a built-in
        model of fixed aggregation (GCN, GraphSAGE, GIN) the prepared graph
        as one CSR adjacency and, where the features are mostly zeros, CSR
        features (:meth:`~gnnperf.models.SparseFeatures.pays_off`), whatever
        the variant trains on; other models (GAT, a reference, a user's)
        read the run's own full graph.
        """
        inputs = self._eval_inputs or self._evaluation_inputs()
        # Kept, unless a mini-batch run's steps would then share an
        # accelerator with the whole graph (those runs exist so they need not).
        keep = not (self.variant is not None and self.variant.minibatch
                    and self.data.x.device.type != "cpu")
        self._eval_inputs = inputs if keep else None
        x, graph, edge_weight = inputs
        model = self._evaluation_model()
        was_training = model.training
        model.eval()
        try:
            pred = model(x, graph, edge_weight).argmax(dim=-1)
        finally:
            model.train(was_training)
        correct = pred == self.data.y
        return {split: float(correct[self.data[f"{split}_mask"]].float().mean())
                for split in ("train", "val", "test")}

    def release_evaluation(self) -> None:
        """Drops what :meth:`evaluate` keeps (before a step's memory is
        measured: a mini-batch run must not hold the full graph then); the
        next evaluation builds it again."""
        self._eval_inputs = None

    def _evaluation_inputs(self) -> tuple[Tensor | SparseFeatures, object, Tensor | None]:
        data, num_nodes = self.data, self.data.num_nodes
        blocks = isinstance(self.model, BlockGNN)
        kept = self._full_graph
        if kept is not None and isinstance(kept[0], SparseAdjacency):
            graph, edge_weight = kept  # the sparse variant's own
        elif blocks and self.model_spec.has(FIXED_AGGREGATION):
            graph = SparseAdjacency.from_edges(*self.prepare_graph(data.edge_index, num_nodes),
                                               num_nodes, num_nodes, transposed=False)
            edge_weight = None
        else:
            graph, edge_weight = self.full_graph()
            if kept is None:  # held by the evaluation alone, which release_evaluation drops
                self._full_graph = None
        x = data.x
        if blocks and self.model_spec.has(BLOCKS) and x.is_floating_point() \
                and SparseFeatures.pays_off(SparseFeatures.density(x)):
            x = SparseFeatures.from_dense(x, transposed=False)
        return x, graph, edge_weight

    def _evaluation_model(self) -> torch.nn.Module:
        if next(self.model.parameters()).device == self.data.x.device:
            return self.model
        # The data stayed on the host (offload): a copy there, its weights
        # refreshed from the trained ones at every evaluation.
        if self._eval_model is None:
            self._eval_model = copy.deepcopy(self.model).to(self.data.x.device)
        else:
            self._eval_model.load_state_dict(self.model.state_dict())
        return self._eval_model


class Technique:
    r"""One training optimisation; a variant is a set of techniques.

    A subclass sets :attr:`name` (the registry key), :attr:`order` (when its
    :meth:`apply` runs relative to the others: graph/batch changes first,
    wrappers such as compilation last), optionally :attr:`requires` and
    :attr:`makes_batches`, and implements :meth:`apply`. Code outside the
    registry asks a variant about its techniques
    (:meth:`~gnnperf.variants.Variant.uses`,
    :attr:`~gnnperf.variants.Variant.minibatch`), never its name.
    """
    name: ClassVar[str]
    order: ClassVar[int] = 50
    requires: ClassVar[tuple[str, ...]] = ()  # techniques it only works with
    # Its batches are sampled subgraphs (sampled, saint, cluster): a variant
    # has at most one such technique, and reports sampled edges per second.
    makes_batches: ClassVar[bool] = False
    needs_batches: ClassVar[bool] = False  # only works with a batch maker
    # The only batch techniques it works with, besides the full graph (None: any).
    allowed_batch_makers: ClassVar[tuple[str, ...] | None] = None
    # The graph stays in host memory; the technique moves each batch (offload).
    keeps_data_on_host: ClassVar[bool] = False
    # Ranks share the training work (ddp): the variant sets run.shards first.
    data_parallel: ClassVar[bool] = False
    # Shown alone in the default comparison (standard_variants).
    in_comparison: ClassVar[bool] = True
    # False: it changes the optimisation, not the step (lr_boost): a step of
    # a variant with it is a step of the variant without it, so the gate and
    # the asv suite, which time steps, leave it out (step_variants).
    changes_step: ClassVar[bool] = True
    combines: ClassVar[bool] = True  # False: a reference that stands alone (tutorial)
    # Why ``compiled`` may not trace a step of it whole (forward, backward and
    # optimiser update as one graph), or None if it may. Then only the forward
    # is compiled.
    step_untraceable_because: ClassVar[str | None] = None
    # Capabilities it needs of the model (gnnperf.models: BLOCKS, ...); a
    # model lacking one cannot run it, for the reason the model gives.
    needs_model: ClassVar[tuple[str, ...]] = ()
    # Packages it needs beyond gnnperf's own dependencies (import names): its
    # n/a is accepted only where one of them is in fact missing
    # (gnnperf.doctor.na_problem).
    needs_packages: ClassVar[tuple[str, ...]] = ()

    def apply(self, run: TrainingRun) -> None:
        raise NotImplementedError

    @classmethod
    def unavailable_on(cls, device: torch.device) -> str | None:
        """Why this technique cannot run on :obj:`device` in this
        environment, in one line naming the fix (a declared n/a, found
        before the dataset loads), or None when it can."""
        return None

    @classmethod
    def standard_variant(cls) -> str:
        """The variant that shows this technique in the comparison (itself
        alone; a technique that needs another joins it here)."""
        return cls.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
