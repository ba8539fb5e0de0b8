"""The GCN, built from blocks that activation checkpointing can wrap whole."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.typing import Adj, OptTensor

from gnnperf.errors import GnnperfError


def normalize_graph(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """Adds self-loops and computes GCN's symmetric edge weights once.

    Doing this outside :class:`GCNConv` keeps the data-dependent
    ``add_remaining_self_loops`` out of the model, so ``torch.compile`` sees
    one graph with no breaks.
    """
    return gcn_norm(edge_index, None, num_nodes, add_self_loops=True)


class _UniformDropout(torch.autograd.Function):
    # Inverted dropout whose keep-mask comes from uniform_ rather than
    # bernoulli_: on CPU torch's bernoulli_ is about 4-5x slower per element,
    # and the input dropout alone took most of a Cora step.
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        uniform = torch.rand_like(x)
        keep = uniform >= p
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        # The output reuses the random numbers' buffer: multiplying x by the
        # bool mask would allocate (and page-fault) a float copy of the mask
        # and a fresh output (236 -> 140 ms at 100k x 256 here).
        return uniform.ge_(p).mul_(x).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        keep, = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout with the same distribution as :func:`F.dropout`; on CPU the mask
    is drawn with ``uniform_`` (faster there), elsewhere PyTorch's fused kernel."""
    if not training or p == 0.0:
        return x
    if x.device.type == "cpu":
        return _UniformDropout.apply(x, p)
    return F.dropout(x, p=p, training=True)


class _CachedTransposeSpMM(torch.autograd.Function):
    # adj_t @ x whose backward multiplies by a transpose built once with the
    # graph. torch.sparse.mm's own backward transposes the CSR matrix (a sort
    # and copies) on every step: on synthetic-1m at width 16 that made
    # forward+backward 96 ms instead of 22 ms.
    @staticmethod
    def forward(ctx, x: Tensor, adj_t: Tensor, adj: Tensor) -> Tensor:
        ctx.adj = adj  # a constant: its values never require grad
        return _sparse_times_dense(adj_t, x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        return _sparse_times_dense(ctx.adj, grad), None, None


def _sparse_times_dense(sparse: Tensor, dense: Tensor) -> Tensor:
    # addmm with beta=0 ignores its uninitialised input; torch.sparse.mm
    # zero-fills a result and then copies it (258 -> 218 ms at width 256).
    out = dense.new_empty(sparse.size(0), dense.size(1))
    return torch.addmm(out, sparse, dense, beta=0)


def attach_transpose(adj_t: Tensor, adj: Tensor) -> Tensor:
    """Gives a sparse :obj:`adj_t` (targets x sources) its transpose
    :obj:`adj`, which :class:`GCNBlock` then uses for the backward pass. The
    values of both must be constants (no gradient flows to edge weights)."""
    if adj_t.requires_grad or adj.requires_grad:
        raise GnnperfError("a cached transpose needs constant edge weights (requires_grad=False)")
    adj_t.cached_transpose = adj
    return adj_t


class _GCNConv(GCNConv):
    def forward(self, x: Tensor, edge_index: Adj, edge_weight: OptTensor = None,
                num_targets: int | None = None) -> Tensor:
        if num_targets is None or num_targets == x.size(0):
            return super().forward(x, edge_index, edge_weight)
        # GCNConv sizes its output by x; a trimmed layer aggregates into its
        # first num_targets rows only, so the rows no later layer reads get no
        # zero-fill, bias, ReLU or dropout (GCNConv.forward with normalize=False
        # otherwise).
        out = self.propagate(edge_index, x=self.lin(x), edge_weight=edge_weight,
                             size=(x.size(0), num_targets))
        return out if self.bias is None else out + self.bias

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        transpose = getattr(adj_t, "cached_transpose", None)
        if transpose is None or self.aggr != "add":
            return super().message_and_aggregate(adj_t, x)
        return _CachedTransposeSpMM.apply(x, adj_t, transpose)


class LayerGraph(NamedTuple):
    """The graph one layer reads: messages into its first :obj:`num_targets`
    rows from its first :obj:`num_sources` rows (trimmed sampled training)."""
    graph: Adj
    edge_weight: OptTensor
    num_sources: int
    num_targets: int


class GCNBlock(torch.nn.Module):
    r"""Dropout, :class:`GCNConv` (pre-normalised edges) and an optional ReLU:
    the unit activation checkpointing recomputes, so that dropout and ReLU
    outputs are not saved either."""

    def __init__(self, in_channels: int, out_channels: int, dropout: float, activate: bool) -> None:
        super().__init__()
        self.dropout = dropout
        self.activate = activate
        self.conv = _GCNConv(in_channels, out_channels, normalize=False)

    def forward(self, x: Tensor, edge_index: Adj, edge_weight: OptTensor = None,
                num_targets: int | None = None) -> Tensor:
        x = dropout(x, self.dropout, self.training)
        x = self.conv(x, edge_index, edge_weight, num_targets)
        return F.relu(x) if self.activate else x


class GCN(torch.nn.Module):
    r"""The graph convolutional network of Kipf and Welling (2017).

    Args:
        in_channels (int): Input feature width.
        hidden_channels (int): Hidden width (the tutorial's 16 by default).
        out_channels (int): Number of classes.
        num_layers (int): Number of GCN layers. (default: :obj:`2`)
        dropout (float): Dropout before every layer. (default: :obj:`0.5`)
        checkpoint (bool): Recompute each block's activations in the backward
            pass instead of saving them. (default: :obj:`False`)

    The forward pass takes node features and a graph already normalised by
    :func:`normalize_graph` (an :obj:`edge_index` with :obj:`edge_weight`, or a
    sparse adjacency with the weights as values), or one :class:`LayerGraph`
    per layer as :obj:`layers` for trimmed training.
    """

    def __init__(self, in_channels: int, hidden_channels: int = 16, out_channels: int = 7,
                 num_layers: int = 2, dropout: float = 0.5, checkpoint: bool = False) -> None:
        super().__init__()
        if num_layers < 1 or hidden_channels < 1 or in_channels < 1 or out_channels < 1:
            raise GnnperfError(
                f"GCN sizes must be positive (layers={num_layers}, hidden={hidden_channels})")
        if not 0.0 <= dropout < 1.0:
            raise GnnperfError(f"dropout must be in [0, 1), got {dropout}")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.blocks = torch.nn.ModuleList(
            GCNBlock(widths[i], widths[i + 1], dropout, activate=i < num_layers - 1)
            for i in range(num_layers))
        self.checkpoint = checkpoint

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    def forward(self, x: Tensor, edge_index: Adj | None = None, edge_weight: OptTensor = None,
                layers: Sequence[LayerGraph] | None = None) -> Tensor:
        num_targets = None
        for i, block in enumerate(self.blocks):
            if layers is not None:
                edge_index, edge_weight, num_sources, num_targets = layers[i]
                x = x[:num_sources]
            if self.checkpoint and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, edge_index, edge_weight, num_targets,
                               use_reentrant=False)
            else:
                x = block(x, edge_index, edge_weight, num_targets)
        return x
