"""The model registry: ``gcn`` (the default), ``sage``, ``gat`` and ``gin``,
or the user's own model as ``module:callable``. A model says how it wants
the graph prepared (once, outside the model, so ``torch.compile`` sees no
data-dependent graph code), which PyG model is its reference, and which
capabilities the techniques ask of it it lacks, with the reason."""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
from torch import Tensor

from gnnperf.errors import GnnperfError
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
                           f"module:function, a function of (in_channels, hidden, "
                           f"out_channels, layers) returning a torch.nn.Module")

    def build(in_channels: int, hidden: int, out_channels: int, layers: int,
              dropout_p: float) -> torch.nn.Module:
        module = factory(in_channels, hidden, out_channels, layers)
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


__all__ = ["BLOCKS", "Block", "BlockGNN", "CsrMatrix", "DEFAULT_MODEL", "EDGE_WEIGHTS",
           "EdgeIndexModel", "FIXED_AGGREGATION", "GAT", "GCN", "GIN", "GraphSAGE",
           "LayerGraph", "MODELS", "ModelSpec", "REFERENCE", "SparseAdjacency",
           "SparseFeatures", "aggregate", "dropout", "dropout_lanes", "get_model",
           "normalize_graph", "parse_models", "store_transposed"]
