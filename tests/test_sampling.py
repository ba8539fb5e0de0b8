import pytest
import torch
from scipy.stats import chisquare

from gnnperf.data import SyntheticSpec, synthetic_graph
from gnnperf.errors import GnnperfError
from gnnperf.sampling.neighbor import BufferPool, VectorizedNeighborSampler, make_neighbor_loader


@pytest.fixture(scope="module")
def hub_graph():
    return synthetic_graph(SyntheticSpec(4000, 10.0, 8, 4, hub_exponent=1.0), seed=1)


def _in_neighbors(data):
    row, col = data.edge_index
    table = [[] for _ in range(data.num_nodes)]
    for src, dst in zip(row.tolist(), col.tolist()):
        table[dst].append(src)
    return table


def _check_sample(data, fanout, seeds, seed=0, padded=False):
    sampler = VectorizedNeighborSampler(data, fanout, seed=seed, padded=padded)
    node, row, col, edge, nodes_per_hop, edges_per_hop = sampler.sample(seeds)
    neighbors = _in_neighbors(data)
    edges = set(map(tuple, data.edge_index.t().tolist()))

    assert torch.equal(node[: seeds.numel()], seeds)
    assert node.unique().numel() == node.numel()
    assert sum(nodes_per_hop) == node.numel() and sum(edges_per_hop) == row.numel()
    # Every sampled edge exists, and its id points at it.
    global_row, global_col = node[row], node[col]
    assert all((s, t) in edges for s, t in zip(global_row.tolist(), global_col.tolist()))
    assert torch.equal(data.edge_index[0, edge], global_row)
    assert torch.equal(data.edge_index[1, edge], global_col)

    # Per hop: each target gets min(in-degree, fanout) distinct neighbours.
    start_edge, targets_start, targets_end = 0, 0, nodes_per_hop[0]
    for hop, k in enumerate(fanout):
        hop_edges = slice(start_edge, start_edge + edges_per_hop[hop])
        hop_col, hop_row = col[hop_edges], row[hop_edges]
        assert ((hop_col >= targets_start) & (hop_col < targets_end)).all()
        for target in range(targets_start, targets_end):
            picked = hop_row[hop_col == target]
            degree = len(neighbors[int(node[target])])
            assert picked.numel() == min(degree, k)
            assert picked.unique().numel() == picked.numel()
        start_edge += edges_per_hop[hop]
        targets_start, targets_end = targets_end, targets_end + nodes_per_hop[hop + 1]
    return node, row, col


@pytest.mark.parametrize("padded", [False, True])
def test_sampler_correct_on_cora(cora, padded):
    seeds = torch.randperm(cora.num_nodes, generator=torch.Generator().manual_seed(0))[:64]
    _check_sample(cora, [10, 5], seeds, padded=padded)


@pytest.mark.parametrize("padded", [False, True])
def test_sampler_correct_on_hub_graph(hub_graph, padded):
    degree = torch.bincount(hub_graph.edge_index[1], minlength=hub_graph.num_nodes)
    hubs = degree.argsort(descending=True)[:8]
    seeds = torch.cat([hubs, torch.tensor([i for i in range(50) if i not in set(hubs.tolist())])])
    _check_sample(hub_graph, [15, 10], seeds, padded=padded)
    assert degree[hubs].min() > 15  # the hubs do exercise sampling without replacement


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("graph", ["cora", "hub_graph"])
def test_sampling_is_uniform(graph, padded, request):
    data = request.getfixturevalue(graph)
    degree = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
    target = int(degree.argmax())
    k, trials = 5, 4000
    sampler = VectorizedNeighborSampler(data, [k], seed=7, padded=padded)
    counts = torch.zeros(data.num_nodes, dtype=torch.long)
    seeds = torch.tensor([target])
    for _ in range(trials):
        node, row, *_ = sampler.sample(seeds)
        counts.index_add_(0, node[row], torch.ones(row.numel(), dtype=torch.long))
    neighbors = data.edge_index[0, data.edge_index[1] == target]
    observed = counts[neighbors].double()
    assert observed.sum() == trials * k
    expected = torch.full_like(observed, trials * k / neighbors.numel())
    assert chisquare(observed.numpy(), expected.numpy()).pvalue > 1e-3


def test_sampler_is_seeded(cora):
    seeds = torch.arange(32)
    first = VectorizedNeighborSampler(cora, [10, 10], seed=5).sample(seeds)
    again = VectorizedNeighborSampler(cora, [10, 10], seed=5).sample(seeds)
    other = VectorizedNeighborSampler(cora, [10, 10], seed=6).sample(seeds)
    assert all(torch.equal(a, b) for a, b in zip(first[:4], again[:4]))
    assert not torch.equal(first[1], other[1])


def test_loader_batches_seed_first(cora):
    loader = make_neighbor_loader(cora, [10, 5], batch_size=50, input_nodes=cora.train_mask,
                                  backend="vectorized")
    batches = list(loader)
    assert sum(b.batch_size for b in batches) == int(cora.train_mask.sum())
    for batch in batches:
        assert batch.train_mask[: batch.batch_size].all()
        train_nodes = cora.train_mask.nonzero().view(-1)
        assert torch.equal(batch.n_id[: batch.batch_size], train_nodes[batch.input_id])
        assert torch.equal(batch.x, cora.x[batch.n_id])


def test_buffer_pool_reuses_only_released_buffers():
    source = torch.randn(100, 8)
    pool = BufferPool(capacity=2)
    first = pool.index_select(source, torch.arange(10))
    first_ptr = first.data_ptr()
    view = first[2:5]
    del first
    second = pool.index_select(source, torch.arange(10, 20))
    assert second.data_ptr() != first_ptr  # `view` still holds the first buffer
    assert torch.equal(view, source[2:5])
    del view, second
    third = pool.index_select(source, torch.tensor([7, 3, 99]))
    assert third.data_ptr() == first_ptr  # released: reused, not reallocated
    assert torch.equal(third, source[[7, 3, 99]])
    held = [third, pool.index_select(source, torch.arange(5))]
    beyond_capacity = pool.index_select(source, torch.arange(5))
    assert beyond_capacity.data_ptr() not in {t.data_ptr() for t in held}
    assert torch.equal(beyond_capacity, source[:5])
    del held, third, beyond_capacity
    bigger = pool.index_select(source, torch.arange(100))  # fits no pooled buffer
    bigger_ptr = bigger.data_ptr()
    del bigger
    again = pool.index_select(source, torch.arange(90))
    assert again.data_ptr() == bigger_ptr  # an unfit buffer made room, the fitting one is found
    assert torch.equal(again, source[:90])


def test_loader_reuses_feature_buffers_without_touching_held_batches(cora):
    loader = make_neighbor_loader(cora, [10, 5], batch_size=100, backend="vectorized")
    kept = []
    pointers = []
    for index, batch in enumerate(loader):
        pointers.append(batch.x.data_ptr())
        if index % 4 == 0:
            kept.append((batch.n_id, batch.x))  # as a user collecting batches would
    assert len(set(pointers)) < len(pointers)  # released buffers came back
    pooled, unpooled = (make_neighbor_loader(cora, [10, 5], batch_size=100, backend="vectorized",
                                             pool_features=pool) for pool in (True, False))
    assert torch.equal(next(iter(unpooled)).x, next(iter(pooled)).x)  # same seeds, same gather
    assert not hasattr(unpooled, "_feature_pool")
    for n_id, x in kept:
        assert torch.equal(x, cora.x[n_id])


def test_loader_workers_gather_their_own_features(cora):
    # In worker processes batches travel through shared memory: no pooling there.
    loader = make_neighbor_loader(cora, [10, 5], batch_size=400, backend="vectorized",
                                  num_workers=2)
    batches = list(loader)
    assert len(batches) == -(-cora.num_nodes // 400)
    for batch in batches:
        assert torch.equal(batch.x, cora.x[batch.n_id])


def test_all_neighbours_with_minus_one(cora):
    seeds = torch.arange(20)
    node, row, col, *_ = VectorizedNeighborSampler(cora, [-1], seed=0).sample(seeds)
    degree = torch.bincount(cora.edge_index[1], minlength=cora.num_nodes)
    assert row.numel() == int(degree[seeds].sum())


@pytest.mark.parametrize("fanout", [[], [0], [-3, 2]])
def test_bad_fanout(cora, fanout):
    with pytest.raises(GnnperfError, match="fanout"):
        VectorizedNeighborSampler(cora, fanout)


def test_native_backend_without_pyg_lib_is_a_clear_error(cora):
    import torch_geometric.typing as t
    if t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE:
        pytest.skip("pyg-lib or torch-sparse is installed here")
    with pytest.raises(GnnperfError, match="use --sampler vectorized"):
        make_neighbor_loader(cora, [5], 16, backend="native")


def _floyd_step_by_step(sampler, degree, k):
    # Floyd's algorithm as it is usually written, each step's bound and
    # draw worked out in its turn (what the sampler ran before it worked
    # out all steps' at once): the reference for its output.
    chosen = torch.empty(degree.numel(), k, dtype=degree.dtype)
    u = torch.rand(degree.numel(), k, generator=sampler.generator, dtype=torch.float64)
    for i in range(k):
        upper = degree - k + i
        draw = (u[:, i] * (upper + 1)).to(degree.dtype).clamp_(max=upper)
        repeat = (chosen[:, :i] == draw.unsqueeze(1)).any(1)
        chosen[:, i] = torch.where(repeat, upper, draw)
    return chosen


def _sample_hop_as_before(sampler, targets, fanout):
    # The hop as the sampler wrote it before (an offset per slot, then the
    # targets' first in-edges added): the reference for its positions.
    start = sampler.colptr.index_select(0, targets)
    degree = sampler.colptr.index_select(0, targets + 1) - start
    take = degree if fanout < 0 else degree.clamp(max=fanout)
    target_index = torch.repeat_interleave(
        torch.arange(targets.numel(), dtype=sampler.index_dtype), take)
    slot_start = torch.cumsum(take, 0) - take
    offset = torch.arange(target_index.numel(), dtype=take.dtype) - slot_start[target_index]
    if fanout > 0:
        over = (degree > fanout).nonzero().view(-1)
        if over.numel() > 0:
            chosen = _floyd_step_by_step(sampler, degree[over], fanout)
            slots = (slot_start[over].unsqueeze(1) + torch.arange(fanout, dtype=take.dtype)).view(-1)
            offset[slots] = chosen.view(-1).to(offset.dtype)
    return start[target_index] + offset, target_index


def _new_nodes_as_before(sampler, neighbors):
    local = sampler._local
    unseen = neighbors[(local[neighbors] < 0).nonzero().view(-1)]
    position = torch.arange(unseen.numel(), dtype=sampler.index_dtype)
    local[unseen] = position
    return unseen[(local[unseen] == position).nonzero().view(-1)]


@pytest.mark.parametrize("k", [1, 2, 10, 15])
def test_floyd_draws_the_step_by_step_subsets(cora, k):
    # Degrees from k (every slot taken, repeats on almost every step) to far
    # above it, int32 as the sampler holds them.
    degree = torch.cat([torch.full((300,), k), torch.full((300,), k + 1),
                        torch.randint(k, 4 * k + 2, (600,)), torch.randint(k, 5000, (300,))]
                       ).to(torch.int32)
    batched = VectorizedNeighborSampler(cora, [k], seed=3)
    stepwise = VectorizedNeighborSampler(cora, [k], seed=3)
    for _ in range(3):
        assert torch.equal(batched._floyd(degree, k), _floyd_step_by_step(stepwise, degree, k))


@pytest.mark.parametrize("fanout,padded", [([15, 10], False), ([15, 10], True),
                                           ([-1], False), ([25, 5, 2], False), ([1], False)])
def test_sampler_batches_are_those_of_its_step_by_step_reference(hub_graph, fanout, padded,
                                                                 monkeypatch):
    seeds = torch.randperm(hub_graph.num_nodes, generator=torch.Generator().manual_seed(2))[:256]
    batched = VectorizedNeighborSampler(hub_graph, fanout, seed=4, padded=padded)
    stepwise = VectorizedNeighborSampler(hub_graph, fanout, seed=4, padded=padded)
    monkeypatch.setattr(stepwise, "_floyd", lambda degree, k:
                        _floyd_step_by_step(stepwise, degree, k))
    monkeypatch.setattr(stepwise, "_sample_hop", lambda targets, k:
                        _sample_hop_as_before(stepwise, targets, k))
    monkeypatch.setattr(stepwise, "_new_nodes", lambda neighbors:
                        _new_nodes_as_before(stepwise, neighbors))
    for _ in range(2):
        ours, reference = batched.sample(seeds), stepwise.sample(seeds)
        assert all(torch.equal(a, b) for a, b in zip(ours[:4], reference[:4]))
        assert ours[4:] == reference[4:]


@pytest.fixture
def threads():
    # Sets torch's intra-op threads for a test, then restores them.
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def test_sampler_batches_do_not_depend_on_the_thread_count(threads):
    # A hop dedups about 20k entries, well over index_put_'s parallel grain
    # (3000), and thousands of nodes have copies in both halves two threads take.
    graph = synthetic_graph(SyntheticSpec(20000, 20.0, 8, 4, hub_exponent=1.0), seed=1)
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:2048]
    batches = {}
    for count in (1, 2):
        threads(count)
        sampler = VectorizedNeighborSampler(graph, [15, 10], seed=5)
        batches[count] = [sampler.sample(seeds) for _ in range(3)]
    for one, two in zip(batches[1], batches[2]):
        assert all(torch.equal(a, b) for a, b in zip(one[:4], two[:4]))
        assert one[4:] == two[4:]
