"""The kernels every model shares: CPU dropout from 15-bit random lanes, and
CSR matrices (sparse features, sparse adjacency) multiplied by dense ones
through one ``torch.library`` op that ``torch.compile`` compiles around."""
from __future__ import annotations

import copy
import math
import warnings
from typing import Callable

import numpy
import torch
import torch.nn.functional as F
from torch import Tensor

from gnnperf.errors import GnnperfError



def _say_csr_is_beta_silently() -> None:
    """torch warns once per process, from the constructor of every CSR
    tensor, that sparse CSR support is beta: the first CSR tensor is built
    here under a local filter, before a :class:`CsrMatrix` builds its own,
    so gnnperf's runs print no warning and the process's own warning
    filters stay as they were (a global filter at import changed them)."""
    global _CSR_WARNING_SAID
    if _CSR_WARNING_SAID:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        torch.zeros(1, 1).to_sparse_csr()
    _CSR_WARNING_SAID = True


_CSR_WARNING_SAID = False


# Dropout's keep-mask on CPU is drawn from 15-bit lanes of int32 random bits:
# torch's CPU random_ on int32 yields 31 random bits per generator call, two
# lanes, and costs less than uniform_ per element, while bernoulli_ costs
# several times uniform_.
_LANE_BITS = 15
_LANES = 1 << _LANE_BITS


def dropout_lanes(shape: torch.Size, p: float,
                  device: torch.device) -> tuple[Tensor, int, float]:
    r"""Uniform 15-bit lanes of :obj:`shape` (int16), the threshold below
    which an entry is dropped and the scale of the kept ones: each entry is
    kept independently with probability :math:`1 - p'`, where :math:`p'` is
    :obj:`p` rounded to a multiple of :math:`2^{-15}` (exact for 0.5, off by
    at most :math:`1.5 \cdot 10^{-5}` otherwise), and scaled by
    :math:`1 / (1 - p')`, which keeps inverted dropout unbiased. Two lanes
    come from each int32 of ``random_`` (31 random bits: bits 0-14 and 16-30)."""
    numel = math.prod(shape)
    bits = torch.empty((numel + 1) // 2, dtype=torch.int32, device=device)
    if torch.compiler.is_compiling():
        # Dynamo does not trace the in-place random_ (a graph break); it does
        # trace its functional form, which with Inductor's fallback_random
        # draws from the same ATen generator (the same masks as eager).
        bits = torch.ops.aten.random.default(bits)
    else:
        bits.random_()
    lanes = bits.view(torch.int16).bitwise_and_(_LANES - 1)
    threshold = round(p * _LANES)
    return lanes[:numel].view(shape), threshold, _LANES / (_LANES - threshold)


class _LaneDropout(torch.autograd.Function):
    # Inverted dropout with the lanes of dropout_lanes(). The output is a float
    # copy of the lanes turned into the mask in place (to + ge_, cheaper than
    # an integer compare and a bool -> float copy; torch's CPU product of a
    # float and a bool tensor casts per element, unvectorised). The
    # mask is saved as bool only when the input needs a gradient.
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        lanes, threshold, scale = dropout_lanes(x.shape, p, x.device)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(lanes >= threshold)
        ctx.scale = scale
        return lanes.to(x.dtype).ge_(threshold).mul_(x).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        keep, = ctx.saved_tensors
        return keep.to(grad.dtype).mul_(grad).mul_(ctx.scale), None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Inverted dropout: on CPU with the lanes of :func:`dropout_lanes`
    (cheaper random numbers there), elsewhere PyTorch's fused kernel."""
    if not training or p == 0.0:
        return x
    if x.device.type == "cpu":
        return _LaneDropout.apply(x, p)
    return F.dropout(x, p=p, training=True)


def _product_output(dense: Tensor, rows: int) -> Tensor:
    """The buffer a sparse product of :obj:`rows` rows writes into. On CPU
    uninitialised: torch's CPU kernels honour addmm's contract that with
    beta=0 the output is not read (tests/test_models.py's canary fills it
    with NaN). Elsewhere zeros, one memset: torch hands the buffer to
    cuSPARSE's SpMM with beta=0 as it is (it zero-fills only for an empty
    sparse operand), and no cuSPARSE document we found says SpMM never
    reads C then; NaN garbage in fresh GPU memory times 0 is NaN. Still one
    write fewer than torch.sparse.mm, which zero-fills a result and copies it."""
    if dense.device.type == "cpu":
        return dense.new_empty(rows, dense.size(1))
    return dense.new_zeros(rows, dense.size(1))


def _sparse_times_dense(sparse: Tensor, dense: Tensor) -> Tensor:
    out = _product_output(dense, sparse.size(0))
    return torch.addmm(out, sparse, dense, beta=0, out=out)


def _csr_times_dense(crow: Tensor, col: Tensor, values: Tensor, num_cols: int,
                     dense: Tensor) -> Tensor:
    matrix = torch.sparse_csr_tensor(crow, col, values, (crow.numel() - 1, num_cols),
                                     check_invariants=False)
    return _sparse_times_dense(matrix, dense.contiguous())


# gnnperf's ops. The product under torch.compile, which cannot trace
# torch.sparse tensors: an opaque op, so the rest of the model compiles around
# it; eager mode calls the kernel directly. And two conversions that run on
# CPU through NumPy, several times faster than torch's CPU kernels on the
# sizes of a CSR build (measured: its compare and flatnonzero scan with SIMD,
# its stable argsort of 16-bit keys is a radix sort), torch's own kernels
# serving the rest (small inputs, other devices, dtypes NumPy lacks such as
# bfloat16, wider keys) with the same results. As ops, the op counter
# (gnnperf/measure/workcount.py) counts them, their inputs and outputs, where
# it counts a batch's making; the memory NumPy takes while it works is not
# torch's and no memory figure sees it (those are a step's, on a batch made
# before it).
# Defined through torch.library.Library rather than @torch.library.custom_op,
# whose Python wrappers cost more a call than a small graph's product itself.
# Each op is registered once per process: a second import of this file (a
# tool or the asv suite loading gnnperf from another path) finds it there.
_LIBRARIES: list[torch.library.Library] = []  # an op lives as long as its library
#: Keys from which NumPy's radix sort beats torch's CPU sort (below it the
#: op's own cost dominates; measured on Cora-sized CSR builds), and entries
#: from which two radix passes beat one sort of 64-bit keys.
NUMPY_SORT_MIN_KEYS = 1024
RADIX_ENTRY_ORDER_MIN = 4096


def _define_once(schema: str, impls: dict[str, Callable], fake: Callable | None = None) -> None:
    name = schema.split("(")[0]
    if hasattr(torch.ops.gnnperf, name):
        return
    library = torch.library.Library("gnnperf", "FRAGMENT")
    library.define(schema)
    for key, kernel in impls.items():
        library.impl(name, kernel, key)
    if fake is not None:
        torch.library.register_fake(f"gnnperf::{name}", fake, lib=library)
    _LIBRARIES.append(library)


def _csr_mm_fake(crow, col, values, num_cols, dense):
    return dense.new_empty(crow.shape[0] - 1, dense.shape[1])


_define_once("csr_mm(Tensor crow, Tensor col, Tensor values, SymInt num_cols, "
             "Tensor dense) -> Tensor", {"CompositeExplicitAutograd": _csr_times_dense},
             _csr_mm_fake)

_NUMPY_FLOATS = (torch.float32, torch.float64, torch.float16)


def _stored_positions_torch(entries: Tensor) -> Tensor:
    return entries.nonzero().view(-1)


def _stored_positions_cpu(entries: Tensor) -> Tensor:
    if entries.dtype in _NUMPY_FLOATS:
        flat = numpy.flatnonzero(entries.detach().numpy() != 0)
        return torch.from_numpy(flat.astype(numpy.int64, copy=False))
    return _stored_positions_torch(entries)


def _stable_order_torch(keys: Tensor, num_keys: int) -> Tensor:
    return torch.argsort(keys, stable=True)


def _stable_order_cpu(keys: Tensor, num_keys: int) -> Tensor:
    if num_keys <= 1 << 16 and keys.numel() >= NUMPY_SORT_MIN_KEYS:
        order = numpy.argsort(keys.numpy().astype(numpy.uint16), kind="stable")
        return torch.from_numpy(order.astype(numpy.int64, copy=False))
    return _stable_order_torch(keys, num_keys)


_define_once("stored_positions(Tensor entries) -> Tensor",
             {"CPU": _stored_positions_cpu, "CompositeExplicitAutograd": _stored_positions_torch})
_define_once("stable_order(Tensor keys, int num_keys) -> Tensor",
             {"CPU": _stable_order_cpu, "CompositeExplicitAutograd": _stable_order_torch})


def stored_positions(entries: Tensor) -> Tensor:
    """The positions of a vector's entries that are not zero (-0 is zero,
    NaN is not: torch's rule), int64."""
    if entries.dim() != 1:
        raise ValueError(f"stored_positions takes a vector, got {entries.dim()} dimensions")
    return torch.ops.gnnperf.stored_positions(entries)


def stable_order(keys: Tensor, num_keys: int) -> Tensor:
    """The permutation sorting :obj:`keys`, integer ids in
    ``[0, num_keys)`` (the callers' CSR indices; not checked, which would
    cost a pass), equal keys in their stored order, int64."""
    return torch.ops.gnnperf.stable_order(keys, num_keys)


def entry_order(row: Tensor, col: Tensor, shape: tuple[int, int]) -> Tensor:
    """The permutation putting :obj:`(row, col)` entries in row-major
    order, int64: two 16-bit radix passes (by column, then stably by row)
    where both fit on CPU and there are enough entries, else one sort of
    ``row * num_cols + col``."""
    if row.device.type == "cpu" and max(shape) <= 1 << 16 \
            and row.numel() >= RADIX_ENTRY_ORDER_MIN:
        by_col = stable_order(col, shape[1])
        return by_col.index_select(0, stable_order(row.index_select(0, by_col), shape[0]))
    return torch.argsort(row * shape[1] + col)


#: Entries :func:`_count_stored` compares at a time: a cache-sized mask.
_COUNT_CHUNK = 1 << 18
#: What NumPy compares faster than torch counts (it has no fast float16 compare).
_NUMPY_COUNTED = (torch.float32, torch.float64)


def _count_stored(x: Tensor) -> int:
    """How many of :obj:`x`'s entries are not zero (-0 is zero, NaN is
    not). On CPU NumPy's SIMD compare and count of the mask, a chunk at a
    time: about twice its count of a float array itself (measured on
    Cora's features); only a build reads it, which no work metric counts."""
    if x.device.type == "cpu" and x.dtype in _NUMPY_COUNTED:
        flat = x.detach().contiguous().view(-1).numpy()
        return sum(int(numpy.count_nonzero(flat[start:start + _COUNT_CHUNK] != 0))
                   for start in range(0, flat.size, _COUNT_CHUNK))
    return int(torch.count_nonzero(x))


class CsrMatrix:
    r"""A CSR matrix held as its index and value tensors (not a
    ``torch.sparse`` tensor, which ``torch.compile`` cannot trace), with the
    structure of its transpose built once: ``t_crow``, ``t_col`` and
    ``t_perm``, where each of the transpose's values sits in :obj:`values`.
    Indices are int32 where they fit: with int64 ones the product converts
    them on every call.

    Args:
        crow (Tensor): Row pointers, :obj:`[num_rows + 1]`.
        col (Tensor): Column of each stored value.
        values (Tensor): The stored values, row by row.
        shape (tuple[int, int]): :obj:`(num_rows, num_cols)`.
    """

    def __init__(self, crow: Tensor, col: Tensor, values: Tensor,
                 shape: tuple[int, int], transposed: bool = True) -> None:
        _say_csr_is_beta_silently()
        if values.numel() < 2 ** 31 - 1:
            crow, col = crow.int(), col.int()
        self.crow, self.col, self.values, self.shape = crow, col, values, tuple(shape)
        # Eager mode's torch.sparse tensors of the stored values, built on first use.
        self._matrix: Tensor | None = None
        self._t_matrix: Tensor | None = None
        if not transposed:  # forward only (inference): no backward multiplies by the transpose
            self.t_crow = self.t_col = self.t_perm = None
            return
        rows = torch.repeat_interleave(
            torch.arange(self.shape[0], device=col.device, dtype=crow.dtype), crow.diff())
        # Column-major order: the entries are stored row by row, so a stable
        # sort by column alone keeps each column's rows ascending (a sort of
        # the narrow column ids, cheaper than one of column * rows + row keys).
        order = stable_order(col, self.shape[1])
        self.t_crow = torch.zeros(self.shape[1] + 1, dtype=crow.dtype, device=col.device)
        torch.cumsum(torch.bincount(col, minlength=self.shape[1]), 0, out=self.t_crow[1:])
        self.t_col, self.t_perm = rows.index_select(0, order), order

    @classmethod
    def from_dense(cls, dense: Tensor, transposed: bool = True) -> "CsrMatrix":
        """From a dense matrix; :obj:`transposed` False: forward only (no
        transpose structure, which only a backward pass reads)."""
        _say_csr_is_beta_silently()
        if dense.device.type == "cpu" and dense.dim() == 2:
            # One scan for the stored entries' flat positions (NumPy's, the op
            # stored_positions), the rows and columns from them: a fraction of
            # to_sparse_csr's time on CPU (which compares, scans twice and
            # sorts), the same arrays (a test).
            rows, cols = dense.shape
            entries = dense.contiguous().view(-1)
            flat = stored_positions(entries)
            row = flat.div(cols, rounding_mode="floor")
            crow = torch.zeros(rows + 1, dtype=torch.long)
            torch.cumsum(torch.bincount(row, minlength=rows), 0, out=crow[1:])
            return cls(crow, flat - row * cols, entries.index_select(0, flat), (rows, cols),
                       transposed=transposed)
        csr = dense.to_sparse_csr()
        # Copies, not views of the CSR tensor: torch.compile would rebuild a
        # view from its sparse base, which it cannot.
        return cls(csr.crow_indices().clone(), csr.col_indices().clone(),
                   csr.values().clone(), tuple(dense.shape), transposed=transposed)

    @classmethod
    def from_entries(cls, row: Tensor, col: Tensor, values: Tensor,
                     shape: tuple[int, int], transposed: bool = True) -> "CsrMatrix":
        """From unsorted :obj:`(row, col, value)` entries (one sort, one bincount)."""
        order = entry_order(row, col, shape)
        crow = torch.zeros(shape[0] + 1, dtype=torch.long, device=row.device)
        torch.cumsum(torch.bincount(row, minlength=shape[0]), 0, out=crow[1:])
        return cls(crow, col.index_select(0, order), values.index_select(0, order), shape,
                   transposed=transposed)

    def size(self, dim: int) -> int:
        return self.shape[dim]

    def tensors(self) -> dict[str, Tensor]:
        """Its index and value tensors by name (the transpose's included)."""
        return {name: value for name, value in vars(self).items()
                if isinstance(value, Tensor) and not name.startswith("_")}

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> "CsrMatrix":
        """A copy with :obj:`fn` of each of its tensors (e.g. moved to a
        device: the transpose structure moves too, it is not rebuilt)."""
        moved = copy.copy(self)
        for name, tensor in self.tensors().items():
            setattr(moved, name, fn(tensor))
        moved._matrix = moved._t_matrix = None
        return moved

    def __getitem__(self, rows: slice) -> "CsrMatrix":
        """The first rows (``x[:n]``, what a trimmed layer reads)."""
        if not isinstance(rows, slice) or rows.start not in (None, 0) or rows.step not in (None, 1):
            raise TypeError(f"{type(self).__name__} supports prefixes x[:n] only")
        n = min(self.shape[0] if rows.stop is None else rows.stop, self.shape[0])
        if n == self.shape[0]:
            return self
        end = int(self.crow[n])
        return type(self)(self.crow[:n + 1], self.col[:end], self.values[:end],
                          (n, self.shape[1]))

    def matmul(self, dense: Tensor, values: Tensor | None = None) -> Tensor:
        """:obj:`self @ dense`, with other stored :obj:`values` if given: the
        op ``gnnperf::csr_mm`` under ``torch.compile``, the kernel itself in
        eager mode (with the ``torch.sparse`` tensor of constant values built
        once)."""
        if torch.compiler.is_compiling():
            return torch.ops.gnnperf.csr_mm(self.crow, self.col,
                                            self.values if values is None else values,
                                            self.shape[1], dense)
        if values is not None:
            return _csr_times_dense(self.crow, self.col, values, self.shape[1], dense)
        if self._matrix is None:
            self._matrix = self.matrix()
        return _sparse_times_dense(self._matrix, dense.contiguous())

    def transpose_matmul(self, dense: Tensor, transposed_values: Tensor) -> Tensor:
        """:obj:`self.T @ dense`, the transpose holding :obj:`transposed_values`
        (in its own order: ``values[t_perm]``)."""
        if torch.compiler.is_compiling():
            return torch.ops.gnnperf.csr_mm(self.t_crow, self.t_col, transposed_values,
                                            self.shape[0], dense)
        if transposed_values is not getattr(self, "t_values", None):
            return _csr_times_dense(self.t_crow, self.t_col, transposed_values, self.shape[0],
                                    dense)
        if self._t_matrix is None:
            self._t_matrix = self._transpose(transposed_values)
        return _sparse_times_dense(self._t_matrix, dense.contiguous())

    def _transpose(self, transposed_values: Tensor) -> Tensor:
        return torch.sparse_csr_tensor(self.t_crow, self.t_col, transposed_values,
                                       (self.shape[1], self.shape[0]), check_invariants=False)

    def matrix(self, values: Tensor | None = None) -> Tensor:
        """As a ``torch.sparse`` CSR tensor (with other :obj:`values`)."""
        return torch.sparse_csr_tensor(self.crow, self.col,
                                       self.values if values is None else values, self.shape,
                                       check_invariants=False)

    def transpose_matrix(self, values: Tensor | None = None) -> Tensor:
        """The transpose as a ``torch.sparse`` CSR tensor."""
        values = self.values if values is None else values
        return self._transpose(values.index_select(0, self.t_perm))

    def to_dense(self) -> Tensor:
        return self.matrix().to_dense()


#: Below this density a CSR product and the value-only dropout do less work
#: than the dense ones (bag-of-words features are far below it); above it
#: features stay dense.
SPARSE_FEATURES_MAX_DENSITY = 0.1
#: Rows :meth:`SparseFeatures.density` counts at most (on Cora within a few
#: percent of the whole count, whose decision sits an order of magnitude away).
DENSITY_SAMPLE_ROWS = 512


class SparseFeatures(CsrMatrix):
    r"""Node features kept as a :class:`CsrMatrix` (bag-of-words features are
    mostly zeros), for a first layer that multiplies sparse
    by dense and drops out stored values only.

    Dropout on the stored values only has the distribution of dense dropout:
    a zero entry stays zero whether it is dropped or kept, and every stored
    entry is kept independently with probability :math:`1 - p` and scaled by
    :math:`1 / (1 - p)`, as in dense inverted dropout. Build it with
    :meth:`~CsrMatrix.from_dense` from the :obj:`[num_nodes, num_features]`
    features.
    """

    @staticmethod
    def density(x: Tensor) -> float:
        """The share of :obj:`x`'s entries that are not zero, estimated on
        :data:`DENSITY_SAMPLE_ROWS` rows drawn at random where :obj:`x` has
        more (a generator of its own, seeded: the same rows every time, and
        the training's random numbers untouched; random rows, not evenly
        spaced ones, which a periodic layout could alias) and counted whole
        where the estimate lands within a quarter of
        :data:`SPARSE_FEATURES_MAX_DENSITY`, whose decision a sample's error
        could flip there. It decides a representation, and a whole count grows
        with the graph where the sample does not (measured: twice the
        sample's time on Cora, sixty times on synthetic-1m's 100,000 rows)."""
        if x.dim() < 2 or x.size(0) <= DENSITY_SAMPLE_ROWS:
            return _count_stored(x) / max(x.numel(), 1)
        generator = torch.Generator(device=x.device).manual_seed(0)
        rows = x.index_select(0, torch.randint(x.size(0), (DENSITY_SAMPLE_ROWS,),
                                               generator=generator, device=x.device))
        estimate = _count_stored(rows) / rows.numel()
        if abs(estimate - SPARSE_FEATURES_MAX_DENSITY) < SPARSE_FEATURES_MAX_DENSITY / 4:
            return _count_stored(x) / x.numel()
        return estimate

    @staticmethod
    def pays_off(density: float) -> bool:
        """Whether features of this :meth:`density` are sparse enough to be
        kept so (at most :data:`SPARSE_FEATURES_MAX_DENSITY`)."""
        return density <= SPARSE_FEATURES_MAX_DENSITY


class SparseAdjacency(CsrMatrix):
    r"""A normalised adjacency (targets x sources) whose values are constants,
    so its transpose's values are gathered once too: the backward pass of an
    aggregation multiplies by the transpose with no per-step work
    (``torch.sparse.mm``'s own backward re-sorts the CSR matrix every step).
    """

    def __init__(self, crow: Tensor, col: Tensor, values: Tensor,
                 shape: tuple[int, int], transposed: bool = True) -> None:
        if values.requires_grad:
            raise GnnperfError("a sparse adjacency needs constant edge weights "
                               "(requires_grad=False)")
        super().__init__(crow, col, values, shape, transposed)
        self.t_values = None if self.t_perm is None else values.index_select(0, self.t_perm)

    @classmethod
    def from_edges(cls, edge_index: Tensor, edge_weight: Tensor | None, num_targets: int,
                   num_sources: int, transposed: bool = True) -> "SparseAdjacency":
        """The transposed adjacency (targets x sources) of the messages
        :obj:`edge_index` sends (source to target), weighted by
        :obj:`edge_weight` (ones if :obj:`None`): what a layer multiplies
        the node features by; :obj:`transposed` False: forward only."""
        source, target = edge_index
        if edge_weight is None:
            edge_weight = torch.ones(source.numel(), device=source.device)
        return cls.from_entries(target, source, edge_weight, (num_targets, num_sources),
                                transposed=transposed)


class _CsrAggregate(torch.autograd.Function):
    # adjacency @ x for a constant adjacency; the backward multiplies by its
    # transpose, built once with the graph.
    @staticmethod
    def forward(ctx, x: Tensor, adjacency: SparseAdjacency) -> Tensor:
        ctx.adjacency = adjacency
        return adjacency.matmul(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        adjacency = ctx.adjacency
        return adjacency.transpose_matmul(grad, adjacency.t_values), None


def aggregate(adjacency: SparseAdjacency, x: Tensor) -> Tensor:
    """:obj:`adjacency @ x`, differentiable in :obj:`x`."""
    return _CsrAggregate.apply(x, adjacency)


class _SparseInputLinear(torch.autograd.Function):
    # X @ W^T for sparse features X whose (dropped-out) values need no
    # gradient; the backward's X^T @ grad uses the transpose structure built once.
    @staticmethod
    def forward(ctx, values: Tensor, weight: Tensor, features: SparseFeatures) -> Tensor:
        ctx.save_for_backward(values)
        ctx.features = features
        # MKL multiplies by a row-major W^T faster than by a column-major one;
        # store_transposed makes the
        # weight's transpose row-major, so this copies nothing.
        return features.matmul(weight.t(), values)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[None, Tensor, None]:
        values, = ctx.saved_tensors
        features = ctx.features
        grad_weight_t = features.transpose_matmul(grad, values.index_select(0, features.t_perm))
        return None, grad_weight_t.t(), None


def store_transposed(weight: torch.nn.Parameter) -> None:
    """Re-lays :obj:`weight` (in place, the same parameter) column-major, so
    that ``weight.t()`` is a row-major matrix: what a sparse-features first
    layer multiplies by, and the layout of the gradient its backward returns
    (otherwise two transposing copies per step). Fused Adam copies such a
    parameter once per step, which is less."""
    weight.data = weight.data.t().contiguous().t()
