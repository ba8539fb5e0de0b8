"""A vectorised pure-PyTorch neighbor sampler that plugs into PyG's loaders.

PyG's :class:`~torch_geometric.loader.NeighborLoader` needs ``pyg-lib`` or
``torch-sparse``, which have no wheels on plain PyPI installs. This sampler
implements :class:`~torch_geometric.sampler.BaseSampler`, so PyG's
:class:`~torch_geometric.loader.NodeLoader` does the batching, feature
gathering and relabelling bookkeeping around it.
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader, NodeLoader
from torch_geometric.loader.utils import index_select as pyg_index_select
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from gnnperf.errors import GnnperfError
from gnnperf.torch_private import HAS_STORAGE_USE_COUNT, storage_use_count


# torch.nonzero_static has a CUDA kernel from torch 2.6 on (pytorch#141838);
# before it, the nonzero's own wait for the device comes back.
_NONZERO_STATIC_ON_CUDA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 6)


def _nonzero(mask: Tensor, count: int) -> Tensor:
    """The indices of :obj:`mask`'s :obj:`count` true entries, without a
    wait for the device where torch allows it."""
    if mask.device.type == "cpu" or _NONZERO_STATIC_ON_CUDA:
        return torch.nonzero_static(mask, size=count).view(-1)
    return mask.nonzero().view(-1)


class VectorizedNeighborSampler(BaseSampler):
    r"""Uniform neighbor sampling without replacement, vectorised over nodes.

    For every target node of a hop it picks :obj:`min(in_degree, fanout)`
    distinct incoming edges uniformly at random (Floyd's algorithm, run as
    :obj:`fanout` tensor operations over all targets at once), so the cost of a
    hop does not grow with hub degrees. Works on CPU and CUDA tensors alike:
    the graph lives on the device of :obj:`data.edge_index`.

    Output follows PyG's conventions: seed nodes first, then the nodes new in
    each hop; edges of hop 1 before hop 2, with per-hop counts in
    :obj:`num_sampled_nodes` / :obj:`num_sampled_edges` (what
    :func:`~torch_geometric.utils.trim_to_layer` expects).

    Args:
        data (Data): The graph; messages flow along :obj:`edge_index[0] ->
            edge_index[1]`.
        num_neighbors (Sequence[int]): Fan-out per hop; ``-1`` takes all.
        seed (int, optional): Seed of the sampler's own random generator.
        edge_ids (bool, optional): Also return the sampled edges' ids in the
            original graph (needed for edge features only). (default: :obj:`True`)
        padded (bool, optional): Sample into a fixed ``[targets, fanout]``
            grid and compact once at the end, so a hop waits for the device
            only once (for its count of new nodes). :obj:`None` picks it on
            GPUs, where host round-trips cost most. (default: :obj:`None`)
    """

    def __init__(self, data: Data, num_neighbors: Sequence[int], seed: int = 0,
                 edge_ids: bool = True, padded: bool | None = None) -> None:
        if not num_neighbors or any(k == 0 or k < -1 for k in num_neighbors):
            raise GnnperfError(
                f"fanout {list(num_neighbors)} is invalid; give positive sizes per hop "
                f"(or -1 for all neighbours), e.g. --fanout 15,10")
        self.num_neighbors = [int(k) for k in num_neighbors]
        num_nodes = data.num_nodes
        row, col = data.edge_index
        device = row.device
        # CSC over targets: the in-edges of node v are perm[colptr[v]:colptr[v+1]].
        # int32 where ids fit: the hops are gathers, and half the bytes is
        # about half the time on CPU.
        index_dtype = torch.int32 if max(num_nodes, col.numel()) < 2 ** 31 else torch.long
        self.perm = torch.argsort(col, stable=True).to(index_dtype)
        self.row_sorted = row.index_select(0, self.perm).to(index_dtype)
        self.edge_ids = edge_ids
        self.padded = (row.device.type != "cpu") if padded is None else padded
        if self.padded and any(k < 0 for k in num_neighbors):
            raise GnnperfError("padded sampling needs a finite fanout per hop; "
                               "replace -1 by a number or use padded=False")
        counts = torch.bincount(col, minlength=num_nodes)
        self.colptr = torch.zeros(num_nodes + 1, dtype=index_dtype, device=device)
        torch.cumsum(counts, 0, out=self.colptr[1:])
        self.num_nodes = num_nodes
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)
        # Global -> local id map, reset after each batch (cheaper than a fresh
        # num_nodes allocation per batch on large graphs).
        self._local = torch.full((num_nodes,), -1, dtype=index_dtype, device=device)
        self.index_dtype = index_dtype

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> SamplerOutput:
        seeds = inputs.node.to(self.device)
        node, row, col, edge, nodes_per_hop, edges_per_hop = self.sample(seeds)
        edge = edge if self.edge_ids else None
        return SamplerOutput(
            node=node, row=row, col=col, edge=edge,
            num_sampled_nodes=nodes_per_hop, num_sampled_edges=edges_per_hop,
            metadata=(inputs.input_id, inputs.time))

    def sample_from_edges(self, index, neg_sampling=None):  # noqa: D102
        raise NotImplementedError("gnnperf samples from nodes only (node classification)")

    @property
    def edge_permutation(self) -> None:
        return None  # sample() already returns original edge ids

    def sample(self, seeds: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, list[int], list[int]]:
        """Samples the computation graph of :obj:`seeds` (unique global ids).

        Returns:
            (node, row, col, edge, num_sampled_nodes, num_sampled_edges) where
            :obj:`row`/:obj:`col` are local ids into :obj:`node` and
            :obj:`edge` are ids into the original :obj:`edge_index`.
        """
        # index_select rather than tensor[index]: the 1-D gather kernel is
        # faster on CPU, and gathers dominate a hop.
        if self.padded:
            return self._sample_padded(seeds)
        local, index_dtype = self._local, self.index_dtype
        seeds = seeds.to(index_dtype)
        local.index_put_((seeds,), torch.arange(seeds.numel(), device=self.device,
                                                dtype=index_dtype))
        node_parts, row_parts, col_parts, edge_parts = [seeds], [], [], []
        nodes_per_hop, edges_per_hop = [seeds.numel()], []
        frontier, frontier_start, num_total = seeds, 0, seeds.numel()
        try:
            for fanout in self.num_neighbors:
                positions, target_index = self._sample_hop(frontier, fanout)
                neighbors = self.row_sorted.index_select(0, positions)
                new = self._new_nodes(neighbors)
                local.index_put_((new,), torch.arange(num_total, num_total + new.numel(),
                                                      device=self.device, dtype=index_dtype))
                row_parts.append(local.index_select(0, neighbors))
                col_parts.append(target_index + frontier_start)
                if self.edge_ids:
                    edge_parts.append(self.perm.index_select(0, positions))
                node_parts.append(new)
                nodes_per_hop.append(new.numel())
                edges_per_hop.append(positions.numel())
                frontier, frontier_start = new, num_total
                num_total += new.numel()
        finally:
            node = torch.cat(node_parts).long()
            local.index_fill_(0, node, -1)  # a scalar: no blocking host-to-device copy
        edge = torch.cat(edge_parts).long() if self.edge_ids else None
        return (node, torch.cat(row_parts).long(), torch.cat(col_parts).long(), edge,
                nodes_per_hop, edges_per_hop)

    def _sample_padded(self, seeds: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor | None,
                                                     list[int], list[int]]:
        # Every target gets `fanout` slots; a slot past its degree is invalid.
        # Per hop only torch.unique waits for the device; the edges are
        # compacted once, after the last hop, behind one more wait (the
        # doctor checks hops + 1 on CUDA).
        local, index_dtype, device = self._local, self.index_dtype, self.device
        seeds = seeds.to(index_dtype)
        local.index_put_((seeds,), torch.arange(seeds.numel(), device=device, dtype=index_dtype))
        node_parts, nodes_per_hop = [seeds], [seeds.numel()]
        rows, cols, edges, valids = [], [], [], []
        frontier, frontier_start, num_total = seeds, 0, seeds.numel()
        sentinel = torch.full((1,), -1, dtype=index_dtype, device=device)
        try:
            for fanout in self.num_neighbors:
                start = self.colptr.index_select(0, frontier)
                degree = self.colptr.index_select(0, frontier + 1) - start
                # Floyd over max(degree, fanout): all slots of a low-degree
                # target below its degree are its edges, in random order.
                chosen = self._floyd(degree.clamp(min=fanout), fanout)
                valid = (chosen < degree.unsqueeze(1)).view(-1)
                positions = (start.unsqueeze(1) + chosen).view(-1)
                positions = torch.where(valid, positions, 0)
                neighbors = self.row_sorted.index_select(0, positions)
                unseen = valid & (local.index_select(0, neighbors) < 0)
                # The sentinel always sorts first, so dropping it needs no check.
                new = torch.unique(torch.cat([sentinel, torch.where(unseen, neighbors, -1)]))[1:]
                local.index_put_((new,), torch.arange(num_total, num_total + new.numel(),
                                                      device=device, dtype=index_dtype))
                rows.append(local.index_select(0, neighbors))
                cols.append(torch.arange(frontier.numel(), device=device, dtype=index_dtype)
                            .repeat_interleave(fanout) + frontier_start)
                if self.edge_ids:
                    edges.append(self.perm.index_select(0, positions))
                valids.append(valid)
                node_parts.append(new)
                nodes_per_hop.append(new.numel())
                frontier, frontier_start = new, num_total
                num_total += new.numel()
        finally:
            node = torch.cat(node_parts).long()
            local.index_fill_(0, node, -1)  # a scalar: no blocking host-to-device copy
        # One wait for the per-hop counts, which also size the compaction
        # (nonzero_static needs no wait of its own, where nonzero would).
        edges_per_hop = torch.stack([v.sum() for v in valids]).tolist()
        keep = _nonzero(torch.cat(valids), sum(edges_per_hop))
        edge = torch.cat(edges).index_select(0, keep).long() if self.edge_ids else None
        return (node, torch.cat(rows).index_select(0, keep).long(),
                torch.cat(cols).index_select(0, keep).long(), edge, nodes_per_hop, edges_per_hop)

    def _new_nodes(self, neighbors: Tensor) -> Tensor:
        # The distinct neighbours not sampled yet, in a deterministic order.
        local = self._local
        # masked_select: one pass where nonzero and a gather take two.
        unseen = neighbors.masked_select(local.index_select(0, neighbors) < 0)
        if self.device.type != "cpu":
            # GPUs take them sorted: torch.unique, one kernel there.
            return torch.unique(unseen)
        # Dedup without sorting: the last copy of each node represents it. A
        # scatter of the copies' positions keeping the largest (unseen nodes
        # hold -1) picks it whatever the thread count: an index_put_ would
        # keep whichever write landed last, which with several threads is any.
        position = torch.arange(unseen.numel(), device=self.device, dtype=self.index_dtype)
        local.scatter_reduce_(0, unseen.long(), position, reduce="amax")
        return unseen.masked_select(local.index_select(0, unseen) == position)

    def _sample_hop(self, targets: Tensor, fanout: int) -> tuple[Tensor, Tensor]:
        # Returns positions into the CSC edge order and, per sampled edge, the
        # index of its target within `targets`.
        start = self.colptr.index_select(0, targets)
        degree = self.colptr.index_select(0, targets + 1) - start
        take = degree if fanout < 0 else degree.clamp(max=fanout)
        target_index = torch.repeat_interleave(
            torch.arange(targets.numel(), device=self.device, dtype=self.index_dtype), take)
        slot_start = torch.cumsum(take, 0) - take
        # Default: slot i of a target takes its i-th in-edge (all of them),
        # the position slot + (its first in-edge - its first slot).
        positions = (torch.arange(target_index.numel(), device=self.device, dtype=take.dtype)
                     + (start - slot_start).index_select(0, target_index))
        if fanout > 0:
            over = (degree > fanout).nonzero().view(-1)
            if over.numel() > 0:
                chosen = self._floyd(degree.index_select(0, over), fanout)
                slots = (slot_start.index_select(0, over).unsqueeze(1)
                         + torch.arange(fanout, device=self.device, dtype=take.dtype)).view(-1)
                positions.index_put_((slots,), (start.index_select(0, over).unsqueeze(1)
                                                + chosen).view(-1).to(positions.dtype))
        return positions, target_index

    def _floyd(self, degree: Tensor, k: int) -> Tensor:
        # Floyd's algorithm for a uniform k-subset of range(d), one row per
        # node: step i draws r in [0, d-k+i] and takes it, or d-k+i where r
        # is taken already. Every step's bound and draw are worked out at
        # once from the same uniform numbers, then the steps run in order,
        # each one comparison and one select over all rows.
        u = torch.rand(degree.numel(), k, generator=self.generator,
                       device=self.device, dtype=torch.float64)
        upper = degree.unsqueeze(1) - k + torch.arange(k, device=self.device, dtype=degree.dtype)
        draw = torch.minimum((u * (upper + 1)).to(degree.dtype), upper)
        chosen = draw.clone()
        for i in range(1, k):
            repeat = (chosen[:, :i] == draw[:, i:i + 1]).any(1)
            torch.where(repeat, upper[:, i], draw[:, i], out=chosen[:, i])
        return chosen


class BufferPool:
    r"""Output buffers for per-batch row gathers, reused once released.

    A fresh feature batch (large on synthetic-1m) lands in memory that glibc
    maps anew for every large block and the kernel zero-fills page by page on
    first touch, which costs more than the gather itself. The pool keeps a few
    buffers and hands one out again only when no tensor outside the pool refers
    to its storage any more (in a training loop: the batch before last).

    Args:
        capacity (int, optional): Buffers kept at most; gathers beyond it get
            plain fresh tensors. (default: :obj:`3`)
    """
    headroom = 1.25  # batch sizes vary by a few percent: one buffer serves them all

    def __init__(self, capacity: int = 3) -> None:
        self.capacity = capacity
        # (buffer, its storage's use count while only the pool holds it)
        self._buffers: list[tuple[Tensor, int]] = []
        self.enabled = HAS_STORAGE_USE_COUNT

    def index_select(self, source: Tensor, index: Tensor) -> Tensor:
        """``torch.index_select(source, 0, index)`` into a pooled buffer."""
        shape = (index.numel(), *source.shape[1:])
        numel = math.prod(shape)
        buffer = self._take(numel, source) if self.enabled else None
        if buffer is None:
            return torch.index_select(source, 0, index)
        return torch.index_select(source, 0, index, out=buffer[:numel].view(shape))

    def _take(self, numel: int, source: Tensor) -> Tensor | None:
        released = [i for i, (buffer, free_count) in enumerate(self._buffers)
                    if storage_use_count(buffer) == free_count]
        for i in released:
            buffer = self._buffers[i][0]
            if (buffer.dtype, buffer.device) == (source.dtype, source.device) \
                    and buffer.numel() >= numel:
                return buffer
        if released and len(self._buffers) >= self.capacity:
            del self._buffers[released[0]]  # released but unfit: make room for one that fits
        if len(self._buffers) >= self.capacity:
            return None
        buffer = source.new_empty(int(numel * self.headroom))
        self._buffers.append((buffer, storage_use_count(buffer)))
        return buffer


class _PooledFeatures:
    # Mixin for PyG node loaders built on a copy of the data without `x`: adds
    # each batch's features gathered into pooled buffers. Worker processes keep
    # PyG's own gather, which writes into fresh shared memory that the main
    # process then owns; a pooled buffer there would change under its reader.
    def _pool_features(self, features: Tensor) -> None:
        self._features = features
        self._feature_pool = BufferPool()

    def filter_fn(self, out):
        batch = super().filter_fn(out)
        if torch.utils.data.get_worker_info() is None:
            batch.x = self._feature_pool.index_select(self._features, batch.n_id)
        else:
            batch.x = pyg_index_select(self._features, batch.n_id)
        return batch


class _PooledNodeLoader(_PooledFeatures, NodeLoader):
    pass


class _PooledNeighborLoader(_PooledFeatures, NeighborLoader):
    pass


def native_sampler_available() -> bool:
    """Whether PyG's own (pyg-lib / torch-sparse) neighbor sampler can run."""
    import torch_geometric.typing as pyg_typing
    return bool(pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE)


def make_neighbor_loader(data: Data, num_neighbors: Sequence[int], batch_size: int,
                         input_nodes: Tensor | None = None, shuffle: bool = True,
                         seed: int = 0, backend: str = "auto", edge_ids: bool = True,
                         pool_features: bool = True, **loader_kwargs):
    r"""A PyG node loader over :obj:`input_nodes` with neighbor sampling.

    Args:
        backend (str): ``"native"`` (PyG's :class:`NeighborLoader`, needs
            pyg-lib or torch-sparse), ``"vectorized"`` (this module's sampler)
            or ``"auto"`` (native when available).
        edge_ids (bool): Attach :obj:`e_id` to batches (vectorised sampler).
        pool_features (bool): Gather CPU node features into a
            :class:`BufferPool` (a batch's :obj:`x` is then reused two batches
            later unless something still refers to it).
        **loader_kwargs: Passed on to PyTorch's ``DataLoader``
            (:obj:`num_workers`, :obj:`pin_memory`, ...); a :obj:`batch_sampler`
            replaces :obj:`batch_size` and :obj:`shuffle`.
    """
    if batch_size < 1:
        raise GnnperfError(f"batch size must be >= 1, got {batch_size}")
    if backend not in ("auto", "native", "vectorized"):
        raise GnnperfError(f"unknown sampler backend {backend!r}; use auto, native or vectorized")
    use_native = backend == "native" or (backend == "auto" and native_sampler_available()
                                         and data.edge_index.device.type == "cpu")
    if use_native and not native_sampler_available():
        raise GnnperfError("native neighbor sampling needs pyg-lib or torch-sparse; "
                           "install one or use --sampler vectorized")
    if "batch_sampler" in loader_kwargs:  # it makes the batches: no size, no shuffle here
        batching = {}
    else:
        batching = {"batch_size": batch_size, "shuffle": shuffle,
                    "generator": torch.Generator().manual_seed(seed)}
    features = data.x if pool_features and data.x is not None and data.x.device.type == "cpu" \
        else None
    if features is not None:
        data = copy.copy(data)
        data.num_nodes = features.size(0)
        del data.x
    if use_native:
        loader_cls = _PooledNeighborLoader if features is not None else NeighborLoader
        loader = loader_cls(data, num_neighbors=list(num_neighbors), input_nodes=input_nodes,
                            **batching, **loader_kwargs)
    else:
        sampler = VectorizedNeighborSampler(data, num_neighbors, seed=seed, edge_ids=edge_ids)
        loader_cls = _PooledNodeLoader if features is not None else NodeLoader
        loader = loader_cls(data, node_sampler=sampler, input_nodes=input_nodes,
                            **batching, **loader_kwargs)
    if features is not None:
        loader._pool_features(features)
    return loader
