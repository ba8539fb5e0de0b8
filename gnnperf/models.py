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


class SparseFeatures:
    r"""Node features kept as a CSR matrix (bag-of-words features are mostly
    zeros: Cora's are 98.7%), with the structure of its transpose built once
    for the backward pass of the first layer.

    Dropout on the stored values only has the distribution of dense dropout:
    a zero entry stays zero whether it is dropped or kept, and every stored
    entry is kept independently with probability :math:`1 - p` and scaled by
    :math:`1 / (1 - p)`, as in dense inverted dropout.

    Args:
        dense (Tensor): The :obj:`[num_nodes, num_features]` features.
    """

    def __init__(self, dense: Tensor) -> None:
        csr = dense.to_sparse_csr()
        # Copies, not views of the CSR tensor: torch.compile would rebuild a
        # view from its sparse base, which it cannot.
        self._set(csr.crow_indices().clone(), csr.col_indices().clone(), csr.values().clone(),
                  tuple(dense.shape))

    def _set(self, crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> None:
        # int32 indices where they fit: with int64 the CSR product converts
        # them on every call (Cora: 128 -> 106 us per X @ W).
        if values.numel() < 2 ** 31 - 1:
            crow, col = crow.int(), col.int()
        self.crow, self.col, self.values, self.shape = crow, col, values, shape
        # The transpose's structure, and where each of its values sits in ours.
        rows = torch.repeat_interleave(torch.arange(shape[0], device=col.device, dtype=crow.dtype),
                                       crow.diff())
        order = torch.argsort(col.long() * shape[0] + rows)
        self.t_crow = torch.zeros(shape[1] + 1, dtype=crow.dtype, device=col.device)
        torch.cumsum(torch.bincount(col, minlength=shape[1]), 0, out=self.t_crow[1:])
        self.t_col, self.t_perm = rows.index_select(0, order), order

    def __getitem__(self, rows: slice) -> "SparseFeatures":
        """The first rows (``x[:n]``, what a trimmed layer reads)."""
        if not isinstance(rows, slice) or rows.start not in (None, 0) or rows.step not in (None, 1):
            raise TypeError("SparseFeatures supports prefixes x[:n] only")
        n = min(self.shape[0] if rows.stop is None else rows.stop, self.shape[0])
        if n == self.shape[0]:
            return self
        end = int(self.crow[n])
        prefix = SparseFeatures.__new__(SparseFeatures)
        prefix._set(self.crow[:n + 1], self.col[:end], self.values[:end], (n, self.shape[1]))
        return prefix

    def size(self, dim: int) -> int:
        return self.shape[dim]

    def matrix(self, values: Tensor) -> Tensor:
        return torch.sparse_csr_tensor(self.crow, self.col, values, self.shape,
                                       check_invariants=False)

    def transpose_matrix(self, values: Tensor) -> Tensor:
        return torch.sparse_csr_tensor(self.t_crow, self.t_col, values.index_select(0, self.t_perm),
                                       (self.shape[1], self.shape[0]), check_invariants=False)

    def to_dense(self) -> Tensor:
        return self.matrix(self.values).to_dense()


@torch.library.custom_op("gnnperf::csr_mm", mutates_args=())
def csr_mm(crow: Tensor, col: Tensor, values: Tensor, num_cols: int, dense: Tensor) -> Tensor:
    """:obj:`X @ dense` for the CSR matrix X (:obj:`crow`, :obj:`col`,
    :obj:`values`). A custom op, so that ``torch.compile`` keeps it as one
    opaque kernel (Dynamo cannot trace sparse CSR tensors) and compiles what
    is around it."""
    matrix = torch.sparse_csr_tensor(crow, col, values, (crow.numel() - 1, num_cols),
                                     check_invariants=False)
    return _sparse_times_dense(matrix, dense)


@csr_mm.register_fake
def _(crow, col, values, num_cols, dense):
    return dense.new_empty(crow.shape[0] - 1, dense.shape[1])


class _SparseInputLinear(torch.autograd.Function):
    # X @ W^T for a sparse X whose values need no gradient; the backward's
    # X^T @ grad uses the transpose structure built once (SparseFeatures).
    @staticmethod
    def forward(ctx, values: Tensor, weight: Tensor, crow: Tensor, col: Tensor, t_crow: Tensor,
                t_col: Tensor, t_perm: Tensor) -> Tensor:
        ctx.save_for_backward(values, t_crow, t_col, t_perm)
        ctx.num_rows = crow.numel() - 1
        return csr_mm(crow, col, values, t_crow.numel() - 1, weight.t())

    @staticmethod
    def backward(ctx, grad: Tensor):
        values, t_crow, t_col, t_perm = ctx.saved_tensors
        grad_weight_t = csr_mm(t_crow, t_col, values.index_select(0, t_perm), ctx.num_rows, grad)
        return None, grad_weight_t.t(), None, None, None, None, None


class _GCNConv(GCNConv):
    def forward(self, x: Tensor, edge_index: Adj, edge_weight: OptTensor = None,
                num_targets: int | None = None) -> Tensor:
        if num_targets is None or num_targets == x.size(0):
            return super().forward(x, edge_index, edge_weight)
        return self.aggregate_projected(self.lin(x), edge_index, edge_weight, num_targets)

    def aggregate_projected(self, h: Tensor, edge_index: Adj, edge_weight: OptTensor = None,
                            num_targets: int | None = None) -> Tensor:
        """The rest of GCNConv.forward (normalize=False) on features already
        projected by :obj:`lin`: messages into the first :obj:`num_targets`
        rows (all by default), then the bias. GCNConv sizes its output by its
        input; a trimmed layer aggregates into its target rows only, so the
        rows no later layer reads get no zero-fill, bias, ReLU or dropout."""
        size = None if num_targets is None else (h.size(0), num_targets)
        out = self.propagate(edge_index, x=h, edge_weight=edge_weight, size=size)
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

    def forward(self, x: Tensor | SparseFeatures, edge_index: Adj,
                edge_weight: OptTensor = None, num_targets: int | None = None) -> Tensor:
        if isinstance(x, SparseFeatures):  # dropout on the stored values, a sparse product
            values = dropout(x.values, self.dropout, self.training)
            h = _SparseInputLinear.apply(values, self.conv.lin.weight, x.crow, x.col, x.t_crow,
                                         x.t_col, x.t_perm)
            x = self.conv.aggregate_projected(h, edge_index, edge_weight, num_targets)
        else:
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
