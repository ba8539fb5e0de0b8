"""Subgraph samplers of GraphSAINT (random walks) and Cluster-GCN (METIS
clusters) in vectorised pure PyTorch.

PyG's :class:`~torch_geometric.loader.GraphSAINTRandomWalkSampler` and
:class:`~torch_geometric.loader.ClusterData` need ``torch-sparse`` or
``pyg-lib``; this module reproduces their sampling semantics without them, on
the device of the input :obj:`edge_index` (METIS itself runs on the CPU
through ``pymetis``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, NamedTuple

import numpy as np
import torch
from torch import Tensor

from gnnperf.errors import GnnperfError, Unavailable


@dataclass
class Subgraph:
    r"""A node-induced subgraph of a larger graph.

    Args:
        node_ids (Tensor): Global ids of its nodes, sorted ascending, unique.
        edge_index (Tensor): Its edges in local ids (positions in
            :obj:`node_ids`), :obj:`[2, E_sub]`.
        edge_ids (Tensor): Column of each edge in the input :obj:`edge_index`
            (ascending: edges keep their input order).
    """
    node_ids: Tensor
    edge_index: Tensor
    edge_ids: Tensor

    @property
    def num_nodes(self) -> int:
        return self.node_ids.numel()


def _index_dtype(num_nodes: int, num_edges: int) -> torch.dtype:
    # int32 where ids fit: walks and subgraphs are gathers, and half the bytes
    # is about half the time on CPU.
    return torch.int32 if max(num_nodes, num_edges) < 2 ** 31 - 1 else torch.long


class CSR(NamedTuple):
    r"""Out-edges by source: those of node :obj:`v` are CSR positions
    :obj:`rowptr[v]:rowptr[v + 1]`, with targets :obj:`col` and input edge
    ids :obj:`perm` (input order within a row, the sort being stable).
    :obj:`local_map` is scratch space for :func:`induced_subgraph`, all
    :obj:`-1` between calls."""
    rowptr: Tensor
    col: Tensor
    perm: Tensor
    local_map: Tensor

    @classmethod
    def from_edge_index(cls, edge_index: Tensor, num_nodes: int) -> CSR:
        row, col = edge_index
        dtype = _index_dtype(num_nodes, row.numel())
        perm = torch.argsort(row, stable=True)
        rowptr = torch.zeros(num_nodes + 1, dtype=dtype, device=row.device)
        torch.cumsum(torch.bincount(row, minlength=num_nodes), 0, out=rowptr[1:])
        return cls(rowptr, col.index_select(0, perm).to(dtype), perm.to(dtype),
                   torch.full((num_nodes,), -1, dtype=dtype, device=row.device))


def _empty_subgraph(device: torch.device) -> Subgraph:
    empty = torch.empty(0, dtype=torch.long, device=device)
    return Subgraph(empty, empty.view(2, 0), empty)


def induced_subgraph(graph: CSR | Tensor, node_ids: Tensor) -> Subgraph:
    r"""All edges of :obj:`graph` whose both endpoints are in :obj:`node_ids`.

    Args:
        graph (CSR or Tensor): A :class:`CSR` (cost grows with the out-degrees
            of :obj:`node_ids` only: build it once per graph) or an
            :obj:`edge_index` (one pass over all edges).
        node_ids (Tensor): Sorted, unique global node ids.
    """
    device = node_ids.device
    if node_ids.numel() == 0:
        return _empty_subgraph(device)
    local_ids = torch.arange(node_ids.numel(), device=device)
    if not isinstance(graph, CSR):
        size = max(int(graph.max()) if graph.numel() else 0, int(node_ids.max())) + 1
        local_map = torch.full((size,), -1, dtype=torch.long, device=device)
        local_map[node_ids] = local_ids
        local = local_map[graph]
        edge_ids = (local >= 0).all(0).nonzero().view(-1)
        return Subgraph(node_ids.long(), local[:, edge_ids], edge_ids)
    dtype, local_map = graph.rowptr.dtype, graph.local_map
    nodes = node_ids.to(dtype)
    start = graph.rowptr.index_select(0, nodes)
    count = graph.rowptr.index_select(0, nodes + 1) - start
    total = int(count.sum())  # the one host sync: sizes the candidate edges
    row = torch.repeat_interleave(local_ids.to(dtype), count, output_size=total)
    # CSR position of every out-edge of the selected nodes.
    shift = start - (torch.cumsum(count, 0, dtype=dtype) - count)
    pos = torch.arange(total, dtype=dtype, device=device) + shift.index_select(0, row)
    # A global -> local map kept across calls: a gather per candidate edge
    # (binary search in node_ids costs far more on CPU).
    local_map.index_put_((nodes,), local_ids.to(dtype))
    try:
        col = local_map.index_select(0, graph.col.index_select(0, pos))
    finally:
        local_map.index_put_((nodes,), torch.tensor(-1, dtype=dtype, device=device))
    keep = (col >= 0).nonzero().view(-1)
    # CSR order is by source; sorting the ids restores the input edge order.
    edge_ids, order = torch.sort(graph.perm.index_select(0, pos.index_select(0, keep)))
    keep = keep.index_select(0, order)
    edge_index = torch.stack([row.index_select(0, keep), col.index_select(0, keep)])
    return Subgraph(node_ids.long(), edge_index.long(), edge_ids.long())


SAINT_NORMS = ("paper", "pyg")


class SaintNorm(NamedTuple):
    r"""GraphSAINT's normalisation (:meth:`RandomWalkSampler.compute_norm`).

    Args:
        node_norm (Tensor): Loss weight per node, :obj:`[num_nodes]`.
        edge_norm (Tensor): Aggregation multiplier per edge, :obj:`[num_edges]`.
        num_samples (int): Subgraphs drawn to estimate them.
        unseen_nodes (float): Share of the nodes no drawn subgraph held.
        unseen_edges (float): Share of the edges no drawn subgraph held.
        mean_nodes (float): The drawn subgraphs' mean number of nodes.
    """
    node_norm: Tensor
    edge_norm: Tensor
    num_samples: int
    unseen_nodes: float
    unseen_edges: float
    mean_nodes: float


class RandomWalkSampler:
    r"""GraphSAINT's random-walk sampler: :obj:`num_roots` uniform roots, a
    uniform random walk of :obj:`walk_length` steps from each, and the
    subgraph induced by all visited nodes (as PyG's
    :class:`~torch_geometric.loader.GraphSAINTRandomWalkSampler` with
    :obj:`batch_size=num_roots`).

    Walks step along :obj:`edge_index[0] -> edge_index[1]`, all walks of a
    step at once; a node without out-edges keeps the walk in place (as
    ``torch_cluster.random_walk`` does).

    Args:
        edge_index (Tensor): The graph, on the device to sample on.
        num_nodes (int): Number of nodes.
        num_roots (int): Walks (roots) per subgraph.
        walk_length (int): Steps per walk.
        seed (int, optional): Seed of the sampler's random generator.
        sample_nodes (Tensor, optional): Draw roots from these nodes only
            (default: all nodes).
        subgraph_edge_index (Tensor, optional): The graph whose induced
            subgraph a batch is, and whose edges the normalisation counts
            (e.g. the GCN-normalised graph with its self-loops), while walks
            follow :obj:`edge_index` (default: :obj:`edge_index`).
    """

    def __init__(self, edge_index: Tensor, num_nodes: int, num_roots: int, walk_length: int,
                 seed: int = 0, sample_nodes: Tensor | None = None,
                 subgraph_edge_index: Tensor | None = None) -> None:
        if num_roots < 1:
            raise GnnperfError(f"--saint-roots must be >= 1 (walks per batch), got {num_roots}")
        if walk_length < 0:
            raise GnnperfError(f"--saint-walk-length must be >= 0, got {walk_length}")
        if sample_nodes is not None and sample_nodes.numel() == 0:
            raise GnnperfError("no nodes to root random walks at; pass non-empty sample_nodes")
        self.edge_index, self.num_nodes = edge_index, num_nodes
        self.num_roots, self.walk_length = num_roots, walk_length
        self.device = edge_index.device
        self.csr = CSR.from_edge_index(edge_index, num_nodes)
        if subgraph_edge_index is None:
            self.subgraph_edge_index, self.subgraph_csr = edge_index, self.csr
        else:
            self.subgraph_edge_index = subgraph_edge_index
            self.subgraph_csr = CSR.from_edge_index(subgraph_edge_index, num_nodes)
        self.sample_nodes = None if sample_nodes is None else sample_nodes.to(self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)

    def roots(self) -> Tensor:
        """Draws :obj:`num_roots` roots uniformly, with replacement."""
        pool = self.num_nodes if self.sample_nodes is None else self.sample_nodes.numel()
        index = torch.randint(0, pool, (self.num_roots,), generator=self.generator,
                              device=self.device)
        return index if self.sample_nodes is None else self.sample_nodes.index_select(0, index)

    def walk(self, roots: Tensor) -> Tensor:
        """Walks from every root: :obj:`[len(roots), walk_length + 1]` node ids,
        column 0 the roots."""
        rowptr, col = self.csr.rowptr, self.csr.col
        cur = roots.to(rowptr.dtype)
        if col.numel() == 0:  # no edges: every walk stays at its root
            return cur.long().unsqueeze(1).repeat(1, self.walk_length + 1)
        u = torch.rand(self.walk_length, cur.numel(), generator=self.generator,
                       device=self.device, dtype=torch.float64)
        steps = [cur]
        for step in range(self.walk_length):
            start = rowptr.index_select(0, cur)
            degree = rowptr.index_select(0, cur + 1) - start
            # floor(u * degree) < degree for u < 1 (exact in float64).
            pos = start + (u[step] * degree).to(start.dtype)
            moves = degree > 0
            pos = torch.where(moves, pos, 0)  # a sink's start may be E: keep it in range
            cur = torch.where(moves, col.index_select(0, pos), cur)
            steps.append(cur)
        return torch.stack(steps, 1).long()

    def sample(self) -> Subgraph:
        """One GraphSAINT batch: the subgraph induced by a batch of walks."""
        return induced_subgraph(self.subgraph_csr, torch.unique(self.walk(self.roots())))

    def compute_norm(self, num_samples: int, norm: str = "paper", seen_edges: float = 0.0,
                     min_count: int = 1, max_samples: int | None = None) -> SaintNorm:
        r"""GraphSAINT's normalisation, estimated from subgraphs drawn from
        this sampler (advancing its generator): with :math:`C_v` the number of
        drawn subgraphs holding node :math:`v` and :math:`C_{uv}` those holding
        edge :math:`(u, v)` of :obj:`subgraph_edge_index` (messages flow
        :obj:`u = edge_index[0] -> v = edge_index[1]`, as in PyG's
        ``source_to_target`` convolutions),

        * :obj:`norm="paper"` (Zeng et al., ICLR 2020, sec. 3.2 and
          Algorithm 1): :obj:`edge_norm[(u, v)] = C_v / C_uv`, i.e.
          :math:`1 / \alpha_{u,v}` with :math:`\alpha_{u,v} = p_{u,v} / p_v`,
          :math:`v` the aggregating node; given :math:`v \in S`, edge
          :math:`(u, v)` is in :math:`S` with probability :math:`\alpha_{u,v}`,
          so the subgraph aggregation of :math:`v` is an unbiased estimate of
          its full-graph one. A self-loop is in :math:`S` whenever its node
          is, so its norm is 1.
        * :obj:`norm="pyg"`: PyG's ``GraphSAINTSampler._compute_norm``,
          :obj:`C_u / C_uv` with :math:`u` the edge's source
          (:obj:`edge_index[0]`), biased where neighbours are sampled at
          different rates (many times the paper norm's error on the
          power-law graph of ``tests/test_subgraph.py``).
        * :obj:`node_norm[v] = (n + 1) / (C_v + 1) / num_nodes` (both), with
          :math:`n` the subgraphs drawn: :math:`1 / (p_v N)` (the paper's
          :math:`\lambda_v`) estimated almost without bias (see below), so
          that a subgraph's loss weighted by it estimates the mean loss.

        What was never drawn gets a bounded weight, not PyG's
        :obj:`clamp(C_u / 0, max=1e4)` (which on a large graph at the default
        coverage multiplies a share of the edges' messages by :obj:`10^4`): an unseen
        edge keeps its unnormalised weight (:obj:`edge_norm = 1`, the least
        any seen edge gets, as :math:`C_{uv} \le C_v`) and an unseen node's
        loss weight is :obj:`(n + 1) / num_nodes` (PyG's :obj:`10 n / num_nodes`).

        Args:
            num_samples (int): Subgraphs to draw at least.
            norm (str): ``paper`` or ``pyg``, as above.
            seen_edges (float): Then keep drawing until at least this share
                of the edges was each drawn :obj:`min_count` times...
            min_count (int): ...(the relative error of :math:`C_v / C_{uv}`
                is about :math:`1 / \sqrt{C_{uv}}`, and its bias up about
                :math:`1 / C_{uv}`, Jensen's inequality)...
            max_samples (int, optional): ...or until this many subgraphs were
                drawn in all (default: :obj:`num_samples`).

        Returns:
            :class:`SaintNorm`, its tensors float32.
        """
        if num_samples < 1:
            raise GnnperfError(f"--saint-samples must be >= 1 (subgraphs for the "
                               f"normalisation), got {num_samples}")
        if norm not in SAINT_NORMS:
            raise GnnperfError(f"--saint-norm must be one of {', '.join(SAINT_NORMS)}, "
                               f"got {norm!r}")
        if not 0.0 <= seen_edges <= 1.0:
            raise GnnperfError(f"--saint-seen-edges must be in [0, 1], got {seen_edges}")
        if min_count < 1:
            raise GnnperfError(f"--saint-min-count must be >= 1, got {min_count}")
        max_samples = num_samples if max_samples is None else max(max_samples, num_samples)
        node_count = torch.zeros(self.num_nodes, device=self.device)
        num_edges = self.subgraph_edge_index.size(1)
        edge_count = torch.zeros(num_edges, device=self.device)
        # The seen share is checked every 10% of num_samples (one pass over
        # the edges, about what drawing one subgraph costs).
        chunk, drawn, target = max(1, num_samples // 10), 0, num_samples
        while True:
            for _ in range(target - drawn):
                sub = self.sample()
                node_count.index_add_(0, sub.node_ids,
                                      torch.ones_like(sub.node_ids, dtype=torch.float))
                edge_count.index_add_(0, sub.edge_ids,
                                      torch.ones_like(sub.edge_ids, dtype=torch.float))
            drawn = target
            rare_edges = int((edge_count < min_count).sum())
            if drawn >= max_samples or rare_edges <= (1.0 - seen_edges) * num_edges:
                break
            target = min(max_samples, drawn + chunk)
        aggregator = self.subgraph_edge_index[1 if norm == "paper" else 0]
        seen = edge_count > 0
        edge_norm = torch.where(seen, node_count.index_select(0, aggregator)
                                / edge_count.clamp(min=1), 1.0)
        unseen_edges = int((~seen).sum())
        unseen_nodes = int((node_count == 0).sum())
        # (n + 1) / (C_v + 1), not the paper's n / C_v: for C_v ~ Binomial(n,
        # p_v), E[1 / (C_v + 1)] = (1 - (1 - p_v)^(n + 1)) / ((n + 1) p_v), so
        # this estimates 1 / p_v with a bias of (1 - p_v)^(n + 1) only, where
        # n / C_v is biased up by about (1 - p_v) / (n p_v) (enough to push the
        # weighted loss of tests/test_subgraph.py's power-law graph past its
        # tolerance at coverage 20). It also bounds a never-drawn node's weight.
        node_norm = (drawn + 1) / (node_count + 1) / self.num_nodes
        return SaintNorm(node_norm, edge_norm, drawn, unseen_nodes / max(self.num_nodes, 1),
                         unseen_edges / max(num_edges, 1), float(node_count.sum()) / drawn)


def metis_partition(edge_index: Tensor, num_nodes: int, num_parts: int,
                    seed: int = 0) -> Tensor:
    """METIS k-way partition (as PyG's :class:`ClusterData`) of the
    symmetrised graph: :obj:`[num_nodes]` part ids in :obj:`[0, num_parts)`,
    deterministic for a :obj:`seed`. Parts may come out empty on small or
    unbalanced graphs."""
    if seed < 0:
        raise GnnperfError(f"METIS needs --seed >= 0, got {seed}")
    if not 1 <= num_parts <= num_nodes:
        raise GnnperfError(f"--cluster-parts must be between 1 and the number of nodes "
                           f"({num_nodes}), got {num_parts}")
    device = edge_index.device
    if num_parts == 1:
        return torch.zeros(num_nodes, dtype=torch.long, device=device)
    try:
        import pymetis
    except ImportError:
        raise Unavailable("cluster needs pymetis: pip install 'gnnperf[cluster]'") from None
    # METIS wants an undirected graph without self-loops or repeated edges.
    row, col = edge_index.cpu().long()
    off_diagonal = row != col
    row, col = row[off_diagonal], col[off_diagonal]
    key = torch.unique(torch.cat([row * num_nodes + col, col * num_nodes + row]))  # sorted
    xadj = torch.zeros(num_nodes + 1, dtype=torch.long)
    torch.cumsum(torch.bincount(key // num_nodes, minlength=num_nodes), 0, out=xadj[1:])
    xadj, adjncy = xadj.numpy(), (key % num_nodes).numpy()
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2 deprecates xadj=/adjncy=
        graph = {"adjacency": pymetis.CSRAdjacency(xadj, adjncy)}
    else:
        graph = {"xadj": xadj, "adjncy": adjncy}
    # METIS seeds C's srand(), which takes 0 and 1 alike: shift so seeds 0 and 1 differ.
    result = pymetis.part_graph(num_parts, **graph, recursive=False,
                                options=pymetis.Options(seed=int(seed) + 1))
    return torch.from_numpy(np.asarray(result.vertex_part, dtype=np.int64)).to(device)


def edge_cut(edge_index: Tensor, parts: Tensor) -> int:
    """Number of edges (columns of :obj:`edge_index`, so an undirected edge
    stored both ways counts twice) whose endpoints lie in different parts."""
    return int((parts[edge_index[0]] != parts[edge_index[1]]).sum())


class ClusterBatches:
    r"""Cluster-GCN batches: per epoch the clusters in a fresh random order,
    :obj:`clusters_per_batch` at a time, each batch the subgraph induced by
    their nodes (edges between the batch's clusters kept, as PyG's
    :class:`~torch_geometric.loader.ClusterLoader` does).

    Args:
        edge_index (Tensor): The graph, on the device to batch on.
        num_nodes (int): Number of nodes.
        parts (Tensor): Cluster id per node (e.g. from :func:`metis_partition`).
        clusters_per_batch (int): Clusters merged into one batch.
        seed (int, optional): Seed of the cluster-order generator, which
            advances every epoch.
    """

    def __init__(self, edge_index: Tensor, num_nodes: int, parts: Tensor,
                 clusters_per_batch: int, seed: int = 0) -> None:
        if clusters_per_batch < 1:
            raise GnnperfError(f"--cluster-batch must be >= 1 (clusters per batch), "
                               f"got {clusters_per_batch}")
        if parts.shape != (num_nodes,) or (num_nodes and int(parts.min()) < 0):
            raise GnnperfError(f"parts must hold one cluster id >= 0 per node "
                               f"({num_nodes}); compute them with metis_partition")
        self.device = edge_index.device
        self.csr = CSR.from_edge_index(edge_index, num_nodes)
        parts = parts.to(self.device)
        self.num_parts = int(parts.max()) + 1 if num_nodes else 0
        self.clusters_per_batch = clusters_per_batch
        # Nodes grouped by cluster, once: a batch is a few slices of this.
        self.node_order = torch.argsort(parts, stable=True).to(self.csr.rowptr.dtype)
        sizes = torch.bincount(parts, minlength=self.num_parts)
        self.partptr = [0, *torch.cumsum(sizes, 0).tolist()]
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return math.ceil(self.num_parts / self.clusters_per_batch)

    def __iter__(self) -> Iterator[Subgraph]:
        order = torch.randperm(self.num_parts, generator=self.generator).tolist()
        ptr = self.partptr
        for i in range(0, self.num_parts, self.clusters_per_batch):
            chunks = [self.node_order[ptr[p]:ptr[p + 1]]
                      for p in order[i:i + self.clusters_per_batch]]
            yield induced_subgraph(self.csr, torch.sort(torch.cat(chunks)).values)
