"""A step's time over a fixed reference step's, both timed in one process,
block after block (:class:`~benchmarks.training.TrainStepOverReference`).

One asv value of a raw step time carries the speed of the machine at that
minute and of the CPU its process landed on: between identical commits it
moves by several percent on a shared runner (docs/history.md), more than a
1% a commit drift. Timed in the same process, alternating with the step
under test, a fixed reference workload runs at that same speed, so the
ratio of the two cancels it, as the gate's interleaved pairs cancel it
between two arms. The reference is plain torch and lives in the suite, which
is one version for every commit of an ``asv run``: a commit of gnnperf or of
the library under test cannot move it; a torch upgrade can (the ratio then
moves with torch's change to both). An edit of the reference changes every
value of the figure: raise ``TrainStepOverReference.version`` with it, so
asv starts a new history instead of reading the edit as a change point.
"""
from __future__ import annotations

import random
import statistics
import warnings
from typing import Callable

import torch
import torch.nn.functional as F

from .suite import CASES

#: Cora's shape: nodes, directed edges, features, hidden units, classes.
NODES, EDGES, FEATURES, HIDDEN, CLASSES = 2708, 10556, 1433, 16, 7
#: Share of non-zero features (Cora's bag of words: about 18 words a paper).
FEATURE_DENSITY = 0.0127


class ReferenceStep:
    r"""A two-layer GCN training step in plain torch on a fixed random graph
    of Cora's shape: sparse aggregation (:func:`torch.sparse.mm`), dense
    transforms, cross-entropy, backward and an SGD update. No PyG and no
    gnnperf, so no commit of either changes it (an edit of it: raise
    ``TrainStepOverReference.version``).

    A change of the machine's state (the other core's load, another
    tenant's use of the memory bus and the shared cache) slows work of
    different kinds by different amounts: many small kernels more than a
    few large dense ones, passes over more memory than the cache holds
    more than work that stays in it. The ratio cancels such a change only
    as far as the reference does the case's kind of work, so each case
    gets the reference of its kind (:func:`reference_for`): features stored
    as the case stores them (dense, or sparse: CSR, one sparse product with
    the first weight), and for a full-graph dense step the same input
    dropout over the whole feature matrix. docs/history.md has the spread
    each choice cut.

    Args:
        device (torch.device): Where its tensors live and it runs.
        sparse_features (bool, optional): Store the features sparse (CSR).
            (default: :obj:`False`)
        input_dropout (bool, optional): Drop out half of the dense features
            each step, as a full-graph step's first layer does.
            (default: :obj:`False`)
    """

    def __init__(self, device: torch.device, sparse_features: bool = False,
                 input_dropout: bool = False):
        if sparse_features and input_dropout:
            raise ValueError("input_dropout drops dense features out; a sparse-features "
                             "reference has none")
        gen = torch.Generator().manual_seed(0)
        src = torch.randint(NODES, (EDGES,), generator=gen)
        dst = torch.randint(NODES, (EDGES,), generator=gen)
        # Indices drawn in range: no invariant check (torch warns when it is left implicit).
        adj = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.full((EDGES,), 0.25),
                                      (NODES, NODES), check_invariants=False).coalesce()
        self.adj = adj.to(device)
        x = (torch.rand(NODES, FEATURES, generator=gen) < FEATURE_DENSITY).float().to(device)
        self.sparse_features, self.input_dropout = sparse_features, input_dropout
        with warnings.catch_warnings():  # torch's "CSR support is in beta", on its first CSR
            warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support")
            self.x = x.to_sparse_csr() if sparse_features else x
        self.y = torch.randint(CLASSES, (NODES,), generator=gen).to(device)
        self.weights = [(torch.randn(FEATURES, HIDDEN, generator=gen) * 0.03).to(device),
                        (torch.randn(HIDDEN, CLASSES, generator=gen) * 0.3).to(device)]
        for w in self.weights:
            w.requires_grad_()

    def __call__(self) -> None:
        w1, w2 = self.weights
        x = _half_dropped(self.x) if self.input_dropout else self.x
        projected = torch.sparse.mm(x, w1) if self.sparse_features else x @ w1
        hidden = torch.relu(torch.sparse.mm(self.adj, projected))
        loss = F.cross_entropy(torch.sparse.mm(self.adj, hidden @ w2), self.y)
        loss.backward()
        with torch.no_grad():
            for w in self.weights:
                w -= 0.01 * w.grad
                w.grad = None


def _half_dropped(x: torch.Tensor) -> torch.Tensor:
    """Inverted dropout at p = 0.5, drawn as the suite's steps draw it: on a
    CPU two 15-bit lanes from each int32 of ``random_``, turned into the
    mask in place (``gnnperf/models/kernels.py``'s passes over memory,
    written out here so that no commit of gnnperf changes them); elsewhere
    torch's fused kernel."""
    if x.device.type != "cpu":
        return F.dropout(x, p=0.5, training=True)
    bits = torch.empty((x.numel() + 1) // 2, dtype=torch.int32, device=x.device).random_()
    lanes = bits.view(torch.int16).bitwise_and_(0x7FFF)[:x.numel()].view_as(x)
    return lanes.to(x.dtype).ge_(1 << 14).mul_(x).mul_(2.0)


#: Techniques whose steps train on sampled subgraphs: a batch's input
#: dropout runs over its own rows, which stay in cache. Fixed here, not read
#: from the registry (``makes_batches``), so that no gnnperf commit changes
#: which reference a case gets; tests/test_asv_suite.py checks the two agree.
MINIBATCH_TECHNIQUES = frozenset({"sampled", "saint", "cluster"})


def reference_for(variant: str, device: torch.device) -> ReferenceStep:
    """The reference for :obj:`variant` (a registry name, ``+`` between
    techniques), by the kind of work its step does: sparse features where
    it reads them sparse (the ``sparse_features`` technique); dense ones
    otherwise, dropped out over the whole matrix each step for a
    full-graph step (as its first layer does: passes over more memory than
    the cache holds), not for a mini-batch one. By the name, so that no
    commit changes the reference: on a graph whose features the
    ``sparse_features`` technique keeps dense (density over 0.1), the case
    and its reference differ in kind, and the figure's curve there is not
    measured (docs/history.md)."""
    techniques = {name.strip().lower() for name in variant.split("+")}
    sparse = "sparse_features" in techniques
    full_graph = not techniques & MINIBATCH_TECHNIQUES
    return ReferenceStep(device, sparse_features=sparse, input_dropout=full_graph and not sparse)


def step_over_reference(step: Callable[[], object], reference: Callable[[], object],
                        device: torch.device, rounds: int = 30, block_s: float = 0.012
                        ) -> float:
    """The median over :obj:`rounds` of (seconds per :obj:`step`) / (seconds
    per :obj:`reference`), each round one block of each (about
    :obj:`block_s` apiece), the first of the two alternating from round to
    round so neither always follows the other. Each block is timed by the
    suite's one clock (``gnnperf/measure/case.py``'s ``clocked``,
    synchronised on a GPU): its CPU time on a CPU, where another job's load
    stretches wall time but not the work; its wall time on a GPU, whose
    work the host's CPU time does not see."""
    def seconds(fn: Callable[[], object], calls: int) -> float:
        def block() -> None:
            for _ in range(calls):
                fn()
        clock = CASES.clocked(block, device)
        # A clock coarser than the block reads 0: never a division by it.
        return max(clock.cpu if device.type == "cpu" else clock.wall, 1e-9) / calls

    def calls_per_block(fn: Callable[[], object]) -> int:
        fn()  # first-call costs stay out of the estimate
        return max(1, round(block_s / seconds(fn, 1)))

    step_calls, reference_calls = calls_per_block(step), calls_per_block(reference)
    ratios = []
    for index in range(rounds):
        if index % 2:
            per_reference = seconds(reference, reference_calls)
            ratios.append(seconds(step, step_calls) / per_reference)
        else:
            per_step = seconds(step, step_calls)
            ratios.append(per_step / seconds(reference, reference_calls))
    return statistics.median(ratios)


def over_builds(measure: Callable[[int], float], builds: int) -> float:
    """The mean of :obj:`measure` over :obj:`builds` builds, ``measure(i)``
    building (from the second on) its own case and reference. A build's
    layout (cache sets, page boundaries, the allocator's bins) sets how its
    step runs: an offset of a few percent that stays for the process's life
    and that no number of rounds averages out (docs/results.md, "The step
    over a reference"). A new build allocates its model, optimiser state,
    batches and reference anew (the graph's own tensors are shared between
    builds), and spacers of random size, kept until the last build, shift
    the host heap under it, in the spirit of Stabilizer's re-randomised
    layout (Curtsinger and Berger, ASPLOS 2013). The builds' offsets are
    then partly independent draws, and their mean spreads less between
    processes than one build's value: by how much is measured
    (``tools/figure_spread.py``), not assumed."""
    if builds < 1:
        raise ValueError(f"builds must be at least 1, got {builds}")
    spacers, values = [], []
    for index in range(builds):
        if index:
            # One small and one large, so that both malloc's small bins and its top move.
            spacers += [bytearray(random.randrange(1, 4096)),
                        bytearray(random.randrange(1 << 17, 1 << 21))]
        values.append(measure(index))
    return statistics.fmean(values)
