"""The model registry: ``gcn`` (the default), ``sage``, ``gat`` and ``gin``,
or the user's own model as ``module:callable``. A model says how it wants
the graph prepared (once, outside the model, so ``torch.compile`` sees no
data-dependent graph code), which PyG model is its reference, and which
capabilities the techniques ask of it it lacks, with the reason."""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
from torch import Tensor
from torch_geometric.data import Data

from gnnperf.errors import GnnperfError, first_line
from gnnperf.models import references
from gnnperf.models.blocks import Block, BlockGNN, LayerGraph
from gnnperf.models.gat import GAT, self_loop_graph
from gnnperf.models.gcn import GCN, normalize_graph
from gnnperf.models.gin import GIN, sum_graph
from gnnperf.models.kernels import (CsrMatrix, SparseAdjacency, SparseFeatures, aggregate,
                                    dropout, dropout_lanes, store_transposed)
from gnnperf.models.sage import GraphSAGE, mean_weights

#: Capabilities a technique may need of a model (Technique.needs_model).
#: Layer blocks of a projection then an aggregation: checkpointing wraps
#: them, trimming hands each its own graph, sparse features enter the first.
BLOCKS = "blocks"
#: Its aggregation is a fixed sparse matrix (sparse: one sparse-dense product).
FIXED_AGGREGATION = "fixed aggregation"
#: Its aggregation takes edge weights (GraphSAINT's aggregator normalisation).
EDGE_WEIGHTS = "edge weights"
#: A PyG model to be compared with (the tutorial variant).
REFERENCE = "reference"

GraphPreparation = Callable[[Tensor, int], "tuple[Tensor, Tensor | None]"]
ModelBuilder = Callable[[int, int, int, int, float], torch.nn.Module]


@dataclass(frozen=True)
class ModelSpec:
    r"""A model of the registry.

    Args:
        name (str): Registry name, or the ``module:callable`` import path.
        summary (str): One line for tables and help.
        build (callable): ``(in_channels, hidden, out_channels, layers,
            dropout)`` to the module; its forward takes ``x, graph,
            edge_weight`` (the prepared graph).
        prepare_graph (callable): ``(edge_index, num_nodes)`` to the graph
            and edge weights the model reads (self-loops, normalisation):
            done once for the full graph, per batch for sampled subgraphs.
        reference (callable, optional): Builds the PyG model it is
            compared with, trained on the raw :obj:`edge_index`.
        reference_name (str): What :obj:`reference` is.
        lacks (dict): Capability to why this model does not have it.
    """
    name: str
    summary: str
    build: ModelBuilder
    prepare_graph: GraphPreparation
    reference: ModelBuilder | None = None
    reference_name: str = ""
    lacks: Mapping[str, str] = field(default_factory=dict)

    def has(self, capability: str) -> bool:
        return capability not in self.lacks

    def why_not(self, capability: str) -> str:
        return self.lacks[capability]


def _built_in(cls: type[BlockGNN]) -> ModelBuilder:
    def build(in_channels: int, hidden: int, out_channels: int, layers: int,
              dropout_p: float) -> torch.nn.Module:
        return cls(in_channels, hidden, out_channels, layers, dropout_p)
    return build


DEFAULT_MODEL = "gcn"
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec("gcn", "GCN: symmetric-normalised sum with self-loops (the tutorial's)",
              _built_in(GCN), normalize_graph, references.tutorial_gcn,
              "the PyG introduction's 2-layer GCN"),
    ModelSpec("sage", "GraphSAGE: mean over in-neighbours plus a root weight",
              _built_in(GraphSAGE), mean_weights, references.pyg_graphsage,
              "torch_geometric.nn.models.GraphSAGE"),
    ModelSpec("gat", "GAT: 8 attention heads per layer, averaged in the output (PyG's GAT)",
              _built_in(GAT), self_loop_graph, references.pyg_gat,
              "torch_geometric.nn.models.GAT (8 heads)",
              lacks={FIXED_AGGREGATION: "attention weighs every edge anew each step, so no "
                                        "fixed sparse matrix aggregates it",
                     EDGE_WEIGHTS: "attention normalises over each node's sampled "
                                   "in-edges itself; edge weights do not enter it"}),
    ModelSpec("gin", "GIN: sum over in-neighbours plus (1 + eps) x, a 2-layer MLP",
              _built_in(GIN), sum_graph, references.pyg_gin, "torch_geometric.nn.models.GIN"),
)}


class EdgeIndexModel(torch.nn.Module):
    """A user's module whose forward takes ``x, edge_index``, called the
    way the training run calls a model (``x, graph, edge_weight``; the
    user's models get no edge weights)."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None
                ) -> Tensor:
        return self.module(x, edge_index)


def _raw_graph(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, None]:
    return edge_index, None


_BLACK_BOX = "a model given by import path is a black box (forward(x, edge_index))"
#: How ``gnnperf run`` calls a user's builder.
BUILDER_PARAMETERS = "(in_channels, hidden, out_channels, layers)"
_BUILDER_CONTRACT = (f"make it a function of {BUILDER_PARAMETERS} returning a "
                     f"torch.nn.Module whose forward takes (x, edge_index)")


def _user_roots(module_name: str) -> tuple[str, ...]:
    """Where the user's code lives: the top-level package's folders, or the
    single module's file (what a traceback's frames are matched against)."""
    top = sys.modules.get(module_name.partition(".")[0])
    if top is None:
        return ()
    roots = [os.path.abspath(path) for path in getattr(top, "__path__", ())]
    if not roots and getattr(top, "__file__", None):
        roots = [os.path.abspath(top.__file__)]
    return tuple(roots)


def _raised_at(exc: BaseException, path: str) -> str:
    """`` (at file:line in function)`` of the innermost frame of :obj:`exc`
    in the user's code (the package :obj:`path` imports from), else of its
    innermost frame: where to look first. Empty where that frame is this
    module's own call (a builder that refuses its arguments)."""
    frames = traceback.extract_tb(exc.__traceback__)
    roots = _user_roots(path.partition(":")[0])
    theirs = [frame for frame in frames
              if any(os.path.abspath(frame.filename) == root
                     or os.path.abspath(frame.filename).startswith(root + os.sep)
                     for root in roots)]
    frame = (theirs or frames or [None])[-1]
    if frame is None or os.path.abspath(frame.filename) == os.path.abspath(__file__):
        return ""
    return f" (at {frame.filename}:{frame.lineno} in {frame.name})"


def _check_builder(path: str, factory: Callable) -> None:
    """Refuses a builder that cannot take ``gnnperf run``'s four sizes, by its
    signature, before anything is built or trained; one whose signature
    cannot be read (a C function) is checked when called."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(1, 1, 1, 1)
    except TypeError as exc:
        name = getattr(factory, "__name__", path.partition(":")[2])
        raise GnnperfError(f"--model {path}: {name}{signature} cannot take "
                           f"{BUILDER_PARAMETERS} ({exc}); {_BUILDER_CONTRACT}") from None


@functools.lru_cache(maxsize=None)
def _user_model(path: str) -> ModelSpec:
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's import: any error, named
        raise GnnperfError(f"--model {path}: cannot import {module_name} "
                           f"({type(exc).__name__}: {exc}); put it on PYTHONPATH") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise GnnperfError(f"--model {path}: {module_name} has no callable {attribute!r}; give "
                           f"module:function, a function of {BUILDER_PARAMETERS} returning a "
                           f"torch.nn.Module")
    _check_builder(path, factory)

    def build(in_channels: int, hidden: int, out_channels: int, layers: int,
              dropout_p: float) -> torch.nn.Module:
        try:
            module = factory(in_channels, hidden, out_channels, layers)
        except GnnperfError:
            raise
        except TypeError as exc:  # most often its parameters, or what it passes them to
            raise GnnperfError(f"--model {path}: building it raised {first_line(exc)}"
                               f"{_raised_at(exc, path)}; {_BUILDER_CONTRACT}") from exc
        except Exception as exc:  # the user's code: any error, named with where
            raise GnnperfError(f"--model {path}: building it raised {first_line(exc)}"
                               f"{_raised_at(exc, path)}") from exc
        if not isinstance(module, torch.nn.Module):
            raise GnnperfError(f"--model {path} returned {type(module).__name__}, not a "
                               f"torch.nn.Module")
        return EdgeIndexModel(module)

    return ModelSpec(path, f"the user's model {path}", build, _raw_graph,
                     lacks={BLOCKS: f"{_BLACK_BOX}: no layer blocks to checkpoint, trim or "
                                    f"feed sparse features",
                            FIXED_AGGREGATION: f"{_BLACK_BOX}: its aggregation is unknown",
                            EDGE_WEIGHTS: f"{_BLACK_BOX}: it takes no edge weights",
                            REFERENCE: f"{_BLACK_BOX}: there is no PyG model to compare it "
                                       f"with"})


def get_model(name: str) -> ModelSpec:
    """A registered model by name, or the user's ``module:callable``."""
    key = name.strip()
    if key.lower() in MODELS:
        return MODELS[key.lower()]
    module_name, sep, attribute = key.partition(":")
    if sep and module_name and attribute:
        return _user_model(key)
    raise GnnperfError(f"unknown model {name!r}; choose {', '.join(MODELS)} or give your own "
                       f"as module:function (e.g. mypkg.models:build)")


def parse_models(text: str) -> list[str]:
    """A comma-separated model list (``--model``, ``--models``,
    ``$GNNPERF_ASV_MODELS``): each name checked and spelled as the registry
    does, repeats dropped; an empty list is an error."""
    models = list(dict.fromkeys(get_model(name).name for name in text.split(",") if name.strip()))
    if not models:
        raise GnnperfError(f"no model in {text!r}; e.g. gcn,sage")
    return models


#: Graphs up to this many nodes are probed whole, larger ones their first nodes.
PROBE_NODES = 10_000


def _probe_graph(data: Data, max_nodes: int) -> tuple[Tensor, Tensor, str]:
    """The features and edges a probe forward reads, and what they are: the
    whole graph, or its first :obj:`max_nodes` nodes with the edges among
    them."""
    if data.num_nodes <= max_nodes:
        return data.x, data.edge_index, f"the graph's {data.num_nodes} nodes"
    edge_index = data.edge_index
    among = (edge_index < max_nodes).all(dim=0)
    return (data.x[:max_nodes], edge_index[:, among],
            f"the graph's first {max_nodes} of {data.num_nodes} nodes")


def probe_model(name: str, data: Data, hidden: int, layers: int,
                device: torch.device | str = "cpu", max_nodes: int = PROBE_NODES) -> None:
    r"""Builds a user's model (by import path) for :obj:`data` and runs one
    forward in eval mode without gradients, so that a model that cannot run
    on this graph is refused in one line before any variant trains, naming
    the exception and where the user's code raised it (the exception stays
    the error's ``__cause__``: its traceback). The registry's own models are
    not probed; the random number generator's state is kept.

    Args:
        name (str): The model, as :func:`get_model` takes it.
        data (Data): The graph the run trains on (``x``, ``edge_index``,
            integer ``y``).
        hidden (int): Hidden width, as the run builds the model.
        layers (int): Layers, as the run builds the model.
        device (torch.device or str): Where the run trains.
        max_nodes (int): Graphs up to this many nodes are probed whole,
            larger ones on their first :obj:`max_nodes` nodes and the edges
            among them.
    """
    spec = get_model(name)
    if spec.name in MODELS:
        return
    path = spec.name
    x, edge_index, what = _probe_graph(data, max_nodes)
    num_classes = int(data.y.max()) + 1
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        model = spec.build(data.num_features, hidden, num_classes, layers, 0.0)
        try:
            model = model.to(device).eval()
            x, edge_index = x.to(device), edge_index.to(device)
            graph, edge_weight = spec.prepare_graph(edge_index, x.size(0))
            out = model(x, graph, edge_weight)
        except Exception as exc:  # the user's code: any error, named with where
            raise GnnperfError(f"--model {path}: forward on {what} raised {first_line(exc)}"
                               f"{_raised_at(exc, path)}") from exc
    expected = (x.size(0), num_classes)
    if not isinstance(out, Tensor):
        raise GnnperfError(f"--model {path}: forward returned {type(out).__name__}, not a "
                           f"tensor; return the logits, shape (nodes, out_channels) = "
                           f"{expected}")
    if tuple(out.shape) != expected:
        raise GnnperfError(f"--model {path}: forward returned shape {tuple(out.shape)}; "
                           f"expected {expected}: a row of logits per node, one per class "
                           f"(out_channels)")


__all__ = ["BLOCKS", "BUILDER_PARAMETERS", "Block", "BlockGNN", "CsrMatrix", "DEFAULT_MODEL",
           "EDGE_WEIGHTS", "EdgeIndexModel", "FIXED_AGGREGATION", "GAT", "GCN", "GIN",
           "GraphSAGE", "LayerGraph", "MODELS", "ModelSpec", "PROBE_NODES", "REFERENCE",
           "SparseAdjacency", "SparseFeatures", "aggregate", "dropout", "dropout_lanes",
           "get_model", "normalize_graph", "parse_models", "probe_model", "store_transposed"]
