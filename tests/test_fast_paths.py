"""Sparse-adjacency aggregation and exact trimming give the same outputs, for
every model that combines with them."""
import pytest
import torch

from gnnperf.data import load_dataset
from gnnperf.errors import GnnperfError
from gnnperf.models import BLOCKS, FIXED_AGGREGATION, MODELS, SparseAdjacency
from gnnperf.variants import TrainConfig, get_variant

CPU = torch.device("cpu")
#: The models sparse aggregation applies to (a fixed sparse matrix: not GAT).
SPARSE_MODELS = [m for m, spec in MODELS.items() if spec.has(FIXED_AGGREGATION)]
TRIMMED_MODELS = [m for m, spec in MODELS.items() if spec.has(BLOCKS)]


def _per_model(models, layers=(2, 3)):
    """(model, layers): GCN at every depth, the other models at the first."""
    return [(m, n) for m in models for n in (layers if m == "gcn" else layers[:1])]


def _outputs(variant, data, config, state=None):
    run = get_variant(variant).build(data, config, CPU)
    if state is not None:
        run.model.load_state_dict(state)
    run.model.eval()
    batch = next(iter(run.batches()))
    with torch.no_grad():
        if batch.layers is None:
            out = run.model(batch.x, batch.graph, batch.edge_weight)
        else:
            out = run.model(batch.x, layers=batch.layers)
    return out, batch, run.model.state_dict()


@pytest.fixture(scope="module")
def graph():
    return load_dataset("synthetic:nodes=5000,degree=12,features=32,classes=5,hubs=1.0").graph


@pytest.mark.parametrize("model,layers", _per_model(SPARSE_MODELS))
def test_sparse_full_batch_equals_edge_index(graph, model, layers):
    config = TrainConfig(hidden=64, layers=layers, model=model)
    reference, _, state = _outputs("baseline", graph, config)
    sparse, batch, _ = _outputs("sparse", graph, config, state)
    assert isinstance(batch.graph, SparseAdjacency)
    assert torch.allclose(sparse, reference, atol=1e-5)


@pytest.mark.parametrize("variant,model,layers", [
    (variant, model, layers) for variant in ("sampled+trimmed", "sampled+sparse+trimmed", "sampled+sparse")
    for model, layers in _per_model(SPARSE_MODELS if "sparse" in variant else TRIMMED_MODELS)])
def test_trimmed_seed_outputs_equal_untrimmed(graph, variant, model, layers):
    config = TrainConfig(hidden=32, layers=layers, fanout=(10, 5), batch_size=64, model=model)
    reference, ref_batch, state = _outputs("sampled", graph, config)
    trimmed, batch, _ = _outputs(variant, graph, config, state)
    seeds = batch.num_seeds
    assert seeds == ref_batch.num_seeds and torch.equal(batch.x, ref_batch.x)
    assert torch.allclose(trimmed[:seeds], reference[:seeds], atol=1e-5)
    if get_variant(variant).uses("trimmed"):
        # Trimming really drops work: later layers read fewer nodes and edges.
        sources = [layer.num_sources for layer in batch.layers]
        assert sources == sorted(sources, reverse=True) and sources[-1] < sources[0]


@pytest.mark.parametrize("variant,model,layers", [
    (variant, model, layers) for variant in ("trimmed", "sparse+trimmed")
    for model, layers in _per_model(SPARSE_MODELS if variant == "sparse+trimmed"
                                    else TRIMMED_MODELS)])
def test_full_batch_trimming_gives_the_full_graph_loss_and_gradients(variant, model, layers):
    data = load_dataset("synthetic:nodes=3000,degree=4,features=16,classes=4").graph
    config = TrainConfig(hidden=16, layers=layers, dropout=0.0, model=model)
    runs = [get_variant(v).build(data, config, CPU) for v in ("baseline", variant)]
    runs[1].model.load_state_dict(runs[0].model.state_dict())
    batch = next(iter(runs[1].batches()))
    # The receptive field, hop by hop: fewer nodes than the graph, more than the seeds.
    assert batch.num_seeds == int(data.train_mask.sum()) < batch.x.size(0) < data.num_nodes
    assert runs[1].stats["receptive_field_nodes"] == batch.x.size(0)
    assert [layer.num_targets for layer in batch.layers][-1] == batch.num_seeds
    for _ in range(3):  # identical steps: the same loss, so the same gradients
        losses = [float(run.step(next(iter(run.batches())))) for run in runs]
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    # Adam moves a parameter by about lr whatever its gradient's size, so a
    # near-zero gradient summed in another edge order (GAT's softmax: one of
    # 2048 weights 3e-6 apart after 3 steps) differs by more than its rounding.
    for p, q in zip(runs[0].model.parameters(), runs[1].model.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


def test_receptive_field_is_ordered_by_hop():
    from gnnperf.variants.trimmed import receptive_field
    # A path 0 -> 1 -> 2 -> 3 (messages flow along it) and an isolated 4.
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    nodes, per_hop = receptive_field(edge_index, torch.tensor([3]), 5, hops=2)
    assert nodes.tolist() == [3, 2, 1] and per_hop == [1, 1, 1]


def test_sparse_gradients_equal_edge_index_on_a_directed_graph():
    # Directed edges make the adjacency asymmetric, so a backward pass that
    # used adj_t instead of its cached transpose would give other gradients.
    from gnnperf.models import GCN, normalize_graph
    from gnnperf.variants.sparse import to_sparse_adjacency
    torch.manual_seed(0)
    num_nodes = 300
    edge_index, edge_weight = normalize_graph(torch.randint(0, num_nodes, (2, 2000)), num_nodes)
    edge_weight = edge_weight * torch.rand_like(edge_weight)  # asymmetric weights too
    adj_t, _ = to_sparse_adjacency(edge_index, edge_weight, num_nodes, num_nodes)
    model = GCN(12, 32, 4, num_layers=3, dropout=0.0)
    grads = []
    for graph, weight in ((edge_index, edge_weight), (adj_t, None)):
        x = torch.randn(num_nodes, 12, generator=torch.Generator().manual_seed(1),
                        requires_grad=True)
        model.zero_grad()
        model(x, graph, weight).square().sum().backward()
        grads.append([x.grad] + [p.grad.clone() for p in model.parameters()])
    for reference, sparse in zip(*grads):
        assert torch.allclose(sparse, reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model", TRIMMED_MODELS)
def test_trimmed_training_gradients_match(graph, model):
    config = TrainConfig(hidden=16, fanout=(8, 4), batch_size=128, dropout=0.0, model=model)
    runs = [get_variant(v).build(graph, config, CPU) for v in ("sampled", "sampled+trimmed")]
    runs[1].model.load_state_dict(runs[0].model.state_dict())
    losses = [[float(run.step(batch)) for batch in run.batches()] for run in runs]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_sparse_adjacency_refuses_trainable_edge_weights():
    with pytest.raises(GnnperfError, match="constant edge weights"):
        SparseAdjacency(torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1, requires_grad=True),
                        (1, 1))
    adjacency = SparseAdjacency.from_entries(torch.tensor([0, 1, 1]), torch.tensor([1, 0, 1]),
                                             torch.tensor([1.0, 2.0, 3.0]), (2, 2))
    torch.testing.assert_close(adjacency.to_dense(), torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
    torch.testing.assert_close(adjacency.transpose_matrix().to_dense(), adjacency.to_dense().t())
