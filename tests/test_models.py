import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import MLP, GATConv, GINConv, SAGEConv

from gnnperf.errors import GnnperfError
from gnnperf.models import GCN, CsrMatrix, SparseFeatures, dropout, normalize_graph


def test_dropout_matches_torch_semantics():
    torch.manual_seed(0)
    x = torch.ones(200_000, requires_grad=True)
    out = dropout(x, 0.3, training=True)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.005
    # The keep probability is p rounded to 2^-15; the scale keeps it unbiased.
    keep_probability = 1 - round(0.3 * 2 ** 15) / 2 ** 15
    assert abs(keep_probability - 0.7) < 2 ** -16
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / keep_probability))
    out.sum().backward()
    assert torch.equal(x.grad != 0, kept)  # gradient flows through kept units only
    assert dropout(x, 0.3, training=False) is x


def test_dropout_lanes_are_independent_and_seeded():
    from gnnperf.models import dropout_lanes

    def keep_mask():
        lanes, threshold, scale = dropout_lanes(torch.Size([1000, 400]), 0.5, torch.device("cpu"))
        return lanes >= threshold, scale
    torch.manual_seed(3)
    keep, scale = keep_mask()
    assert scale == 2.0 and keep.shape == (1000, 400)
    flat = keep.view(-1).float()
    # Both lanes of each int32 (even and odd entries) keep half, independently.
    for lane in (flat[0::2], flat[1::2]):
        assert abs(lane.mean().item() - 0.5) < 0.005
    pairs = torch.stack([flat[0::2], flat[1::2]])
    assert abs(torch.corrcoef(pairs)[0, 1].item()) < 0.01
    torch.manual_seed(3)
    assert torch.equal(keep_mask()[0], keep)


def test_gcn_matches_pyg_normalising_gcnconv():
    from torch_geometric.nn import GCNConv
    torch.manual_seed(0)
    x = torch.randn(50, 8)
    edge_index = torch.randint(0, 50, (2, 300))
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    model = GCN(8, 16, 3, num_layers=1, dropout=0.0).eval()
    reference = GCNConv(8, 3)
    reference.load_state_dict(model.blocks[0].conv.state_dict())
    ours = model(x, *normalize_graph(edge_index, 50))
    assert torch.allclose(ours, reference(x, edge_index), atol=1e-6)


def test_gcn_shapes_and_checkpoint_equivalence():
    torch.manual_seed(0)
    x = torch.randn(40, 8)
    edge_index, edge_weight = normalize_graph(torch.randint(0, 40, (2, 200)), 40)
    plain = GCN(8, 16, 3, num_layers=3)
    checkpointed = GCN(8, 16, 3, num_layers=3, checkpoint=True)
    checkpointed.load_state_dict(plain.state_dict())
    grads = []
    for model in (plain, checkpointed):
        torch.manual_seed(1)
        F.cross_entropy(model(x, edge_index, edge_weight), torch.zeros(40, dtype=torch.long)).backward()
        grads.append(model.blocks[0].conv.lin.weight.grad)
    assert torch.allclose(grads[0], grads[1])


@pytest.mark.parametrize("kwargs", [dict(num_layers=0), dict(hidden_channels=0), dict(dropout=1.0)])
def test_bad_model_sizes(kwargs):
    with pytest.raises(GnnperfError):
        GCN(8, **{"hidden_channels": 16, "out_channels": 3, **kwargs})


@pytest.mark.parametrize("model", ["gcn", "sage", "gat", "gin"])
def test_sparse_features_equal_dense_with_dropout_off(cora, model):
    from gnnperf.variants import TrainConfig, get_variant
    cpu = torch.device("cpu")
    config = TrainConfig(dropout=0.0, model=model)
    dense = get_variant("baseline").build(cora, config, cpu)
    sparse = get_variant("sparse_features").build(cora, config, cpu)
    # Counted on 512 random rows: an estimate, close to the whole count.
    assert sparse.stats["feature_density"] == pytest.approx(49216 / (2708 * 1433), rel=0.05)
    sparse.model.load_state_dict(dense.model.state_dict())
    a, b = next(iter(dense.batches())), next(iter(sparse.batches()))
    out_a, out_b = dense.model(a.x, a.graph, a.edge_weight), sparse.model(b.x, b.graph, b.edge_weight)
    torch.testing.assert_close(out_b, out_a, rtol=1e-5, atol=1e-5)
    out_a.square().sum().backward()
    out_b.square().sum().backward()
    for p, q in zip(dense.model.parameters(), sparse.model.parameters()):
        # float32 sums of 2,708 rows in two orders: the error scales with the
        # gradient's size (GIN's sum aggregation makes large gradients, where
        # a fixed absolute tolerance fails on rare draws), so atol does too.
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4,
                                   atol=1e-5 * max(1.0, float(p.grad.abs().max())))


def test_sparse_features_prefix_rows_for_trimmed_layers(cora):
    from gnnperf.models import SparseFeatures
    features = SparseFeatures.from_dense(cora.x)
    for n in (1, 500, 2708):
        torch.testing.assert_close(features[:n].to_dense(), cora.x[:n])
        transpose = features[:n].transpose_matrix(features[:n].values).to_dense()
        torch.testing.assert_close(transpose, cora.x[:n].t())


def test_the_compiled_csr_product_matches_its_fake_sizes():
    # The compiled step runs without Inductor's size asserts
    # (CPU_INDUCTOR_OPTIONS), so the op's fake implementation must give the
    # real output's shape, dtype and strides: opcheck compares them.
    dense = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]])
    matrix = CsrMatrix.from_dense(dense)
    rhs = torch.randn(3, 4)
    torch.library.opcheck(torch.ops.gnnperf.csr_mm.default,
                          (matrix.crow, matrix.col, matrix.values, 3, rhs),
                          test_utils=("test_schema", "test_faketensor"))
    out = torch.ops.gnnperf.csr_mm(matrix.crow, matrix.col, matrix.values, 3, rhs)
    torch.testing.assert_close(out, dense @ rhs)


def _random_graph(num_nodes=60, num_edges=400, seed=0):
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    return edge_index[:, edge_index[0] != edge_index[1]]


@pytest.mark.parametrize("model,pyg_conv", [
    ("sage", lambda: SAGEConv(8, 5)),
    ("gin", lambda: GINConv(MLP([8, 5, 5], norm=None))),
    ("gat", lambda: GATConv(8, 5, heads=8, concat=False)),  # an output layer
    ("gat-hidden", lambda: GATConv(8, 5, heads=8)),
])
def test_each_models_layer_computes_what_pygs_own_conv_does(model, pyg_conv):
    # Ours projects first and aggregates the projected width, on a graph
    # prepared once; PyG's conv on the raw edges must give the same outputs
    # and input gradients with the same weights.
    from gnnperf.models import get_model
    from gnnperf.models.gat import _GATConv
    from gnnperf.models.references import LAYER_COPIES
    torch.manual_seed(0)
    spec = get_model(model.split("-")[0])
    net = spec.build(8, 5, 5, 1, 0.0).eval()
    if model == "gat-hidden":  # a hidden layer: 8 heads concatenated
        net.blocks[0].conv = _GATConv(8, 5, 8, concat=True, dropout=0.0).eval()
    reference = pyg_conv().eval()
    with torch.no_grad():  # our weights into PyG's conv, as the tutorial variant pairs them
        LAYER_COPIES[spec.name](net.blocks[0].conv, reference)
    edge_index = _random_graph()
    x = torch.randn(60, 8, requires_grad=True)
    ours = net(x, *spec.prepare_graph(edge_index, 60))
    theirs = reference(x, edge_index)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    grad_ours, = torch.autograd.grad(ours.square().sum(), x)
    grad_theirs, = torch.autograd.grad(theirs.square().sum(), x)
    torch.testing.assert_close(grad_ours, grad_theirs, rtol=1e-4, atol=1e-5)


def test_gat_is_pygs_gat_model_eight_heads_concatenated_then_averaged():
    # The same layers as its reference, torch_geometric.nn.models.GAT.
    from gnnperf.models import GAT, get_model
    net = GAT(1433, 8, 7, num_layers=2)
    first, last = (block.conv for block in net.blocks)
    assert (first.heads, first.out_channels, first.concat) == (8, 8, True)
    assert (last.heads, last.out_channels, last.concat) == (8, 7, False)
    assert last.in_channels == 64
    reference = get_model("gat").reference(1433, 8, 7, 2, 0.5)
    assert [(c.in_channels, c.out_channels, c.heads, c.concat) for c in reference.convs] == [
        (c.in_channels, c.out_channels, c.heads, c.concat) for c in (first, last)]
    assert sum(p.numel() for p in net.parameters()) == sum(
        p.numel() for p in reference.parameters())


@pytest.mark.parametrize("model", ["sage", "gat", "gin"])
def test_every_models_checkpointed_blocks_give_the_same_gradients(model):
    from gnnperf.models import get_model
    spec = get_model(model)
    edge_index, edge_weight = spec.prepare_graph(_random_graph(40, 200), 40)
    x = torch.randn(40, 8, generator=torch.Generator().manual_seed(2))
    grads = []
    for checkpointed in (False, True):
        torch.manual_seed(0)
        net = spec.build(8, 16, 3, 3, 0.5)
        net.checkpoint = checkpointed
        torch.manual_seed(1)  # the same dropout (and attention dropout) masks
        F.cross_entropy(net(x, edge_index, edge_weight),
                        torch.zeros(40, dtype=torch.long)).backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    for plain, recomputed in zip(*grads):
        torch.testing.assert_close(recomputed, plain)


def test_unknown_or_broken_models_are_one_line_errors(tmp_path, monkeypatch):
    from gnnperf.models import get_model
    with pytest.raises(GnnperfError, match=r"unknown model 'gcm'; choose gcn, sage, gat, gin"):
        get_model("gcm")
    with pytest.raises(GnnperfError, match=r"cannot import no_such_module .*PYTHONPATH"):
        get_model("no_such_module:build")
    (tmp_path / "usermodels_bad.py").write_text("build = 3\ndef gives_a_list(*sizes):\n"
                                                "    return [1]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GnnperfError, match="has no callable 'build'"):
        get_model("usermodels_bad:build")
    with pytest.raises(GnnperfError, match="returned list, not a torch.nn.Module"):
        get_model("usermodels_bad:gives_a_list").build(8, 16, 3, 2, 0.5)


@pytest.mark.parametrize("model,dropout", [("sage", 0.5), ("gin", 0.5), ("gat", 0.0)])
def test_the_reference_trains_paired_with_the_baseline(model, dropout):
    # The whole run, not one layer: the baseline variant and the tutorial
    # (PyG's own GraphSAGE, GAT or GIN on the raw edges) from one seed start
    # from the same weights and draw the same dropout masks, so step for step
    # they reach the same loss, and what is left between their accuracies is
    # the implementations, not the draws. GAT's attention dropout (ours has
    # it, PyG's model passes none to its convs) is off, so nothing differs.
    from gnnperf.data import load_dataset
    from gnnperf.variants import TrainConfig, get_variant
    data = load_dataset("synthetic:nodes=400,degree=6,features=24,classes=4").graph
    config = TrainConfig(model=model, dropout=dropout, hidden=8)

    def train(variant):  # as a run trains each variant: seeded, built, stepped
        torch.manual_seed(0)
        run = get_variant(variant).build(data, config, torch.device("cpu"))
        losses = [float(run.step(next(iter(run.batches())))) for _ in range(15)]
        return losses, run.evaluate()

    (mine, my_eval), (theirs, their_eval) = train("baseline"), train("tutorial")
    assert mine == pytest.approx(theirs, rel=1e-4, abs=1e-6)
    assert mine[-1] < mine[0]
    assert my_eval == pytest.approx(their_eval, abs=0.01)


def test_the_tutorial_gcn_starts_from_the_baselines_weights():
    # The tutorial's GCN has no dropout (ours has), so only the start pairs.
    from gnnperf.data import load_dataset
    from gnnperf.variants import TrainConfig, get_variant
    data = load_dataset("synthetic:nodes=400,degree=6,features=24,classes=4").graph
    ours, reference = (get_variant(v).build(data, TrainConfig(hidden=8), torch.device("cpu"))
                       for v in ("baseline", "tutorial"))
    mine = [block.conv.state_dict() for block in ours.model.blocks]
    theirs = [reference.model.conv1.state_dict(), reference.model.conv2.state_dict()]
    for a, b in zip(mine, theirs):
        assert a.keys() == b.keys()
        for key in a:
            torch.testing.assert_close(a[key], b[key])


# The product's output buffer ---------------------------------------------------
def test_the_cpu_product_ignores_its_uninitialised_output_with_beta_zero(monkeypatch):
    # On CPU the product writes into new_empty memory and relies on torch's
    # addmm contract (beta=0: the output is not read, NaN in it does not
    # propagate). A canary of the installed torch's CPU kernel: garbage
    # (NaN) in the buffer must not reach the result.
    from gnnperf.models import kernels
    real_new_empty = torch.Tensor.new_empty
    monkeypatch.setattr(torch.Tensor, "new_empty",
                        lambda self, *size, **kw: real_new_empty(self, *size, **kw).fill_(
                            float("nan")))
    adjacency = torch.eye(64)[torch.randperm(64, generator=torch.Generator().manual_seed(0))]
    dense = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    product = kernels._sparse_times_dense(adjacency.to_sparse_csr(), dense)
    torch.testing.assert_close(product, adjacency @ dense)


def test_the_product_zero_fills_its_output_on_devices_other_than_the_cpu(monkeypatch):
    # cuSPARSE's SpMM is handed the output buffer with beta=0 (torch zero-
    # fills it only for an empty sparse operand), and nothing documents that
    # it never reads it: off the CPU the buffer starts as zeros, so garbage
    # in freshly allocated GPU memory cannot turn into NaN.
    from gnnperf.models import kernels
    made = []
    real_new_zeros, real_new_empty = torch.Tensor.new_zeros, torch.Tensor.new_empty
    monkeypatch.setattr(torch.Tensor, "new_zeros", lambda self, *size, **kw: made.append(
        ("zeros", self.device.type)) or real_new_zeros(self, *size, **kw))
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, *size, **kw: made.append(
        ("empty", self.device.type)) or real_new_empty(self, *size, **kw))
    assert kernels._product_output(torch.ones(3, 4, device="meta"), 5).shape == (5, 4)
    assert kernels._product_output(torch.ones(3, 4), 5).shape == (5, 4)
    assert made == [("zeros", "meta"), ("empty", "cpu")]


BUILDERS = '''
import torch


def two_sizes(in_channels, out_channels):
    return torch.nn.Linear(in_channels, out_channels)


def four_sizes(in_channels, hidden, out_channels, layers, *, bias=True):
    return torch.nn.Linear(in_channels, out_channels, bias=bias)


def wants_heads(in_channels, hidden, out_channels, layers, *, heads):
    return torch.nn.Linear(in_channels, out_channels)


def raises_inside(in_channels, hidden, out_channels, layers):
    raise ValueError("layers must be even")


uninspectable = dict  # a C callable: no signature to read, checked when called
'''


def test_a_builders_signature_is_checked_when_the_model_is_named(tmp_path, monkeypatch):
    from gnnperf.models import get_model, parse_models
    (tmp_path / "usermodels_builders.py").write_text(BUILDERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    expected = "(in_channels, hidden, out_channels, layers)"
    with pytest.raises(GnnperfError) as info:
        parse_models("gcn,usermodels_builders:two_sizes")
    message = str(info.value)
    assert message.startswith("--model usermodels_builders:two_sizes: ")
    assert "two_sizes(in_channels, out_channels)" in message and expected in message
    assert "\n" not in message
    with pytest.raises(GnnperfError, match=r"wants_heads\(.*missing a required argument: "
                                           r"'heads'.*\(in_channels, hidden, out_channels"):
        get_model("usermodels_builders:wants_heads")
    assert get_model("usermodels_builders:four_sizes").name == "usermodels_builders:four_sizes"
    # What the builder raises itself: named with where, one line.
    with pytest.raises(GnnperfError, match=r"usermodels_builders:raises_inside: building it "
                                           r"raised ValueError: layers must be even \(at "
                                           r".*usermodels_builders\.py:\d+"):
        get_model("usermodels_builders:raises_inside").build(8, 16, 3, 2, 0.5)
    with pytest.raises(GnnperfError, match=r"uninspectable: building it raised TypeError: dict "
                                           r"expected .*; make it a function of \(in_channels"):
        get_model("usermodels_builders:uninspectable").build(8, 16, 3, 2, 0.5)


PROBED = '''
import torch

seen = []


class Recorded(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.linear = torch.nn.Linear(in_channels, out_channels)

    def forward(self, x, edge_index):
        seen.append((x.size(0), int(edge_index.max()) + 1 if edge_index.numel() else 0))
        return self.linear(x)


class Raises(Recorded):
    def forward(self, x, edge_index):
        raise ValueError(f"no graph of {x.size(0)} nodes")


def fine(in_channels, hidden, out_channels, layers):
    return Recorded(in_channels, out_channels)


def raises(in_channels, hidden, out_channels, layers):
    return Raises(in_channels, out_channels)


def hidden_wide(in_channels, hidden, out_channels, layers):
    return Recorded(in_channels, hidden)
'''
PROBED_RAISE_LINE = 19


def test_the_probe_forward_names_where_a_users_model_fails(tmp_path, monkeypatch, cora):
    from gnnperf.models import probe_model
    (tmp_path / "usermodels_probed.py").write_text(PROBED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import usermodels_probed
    probe_model("usermodels_probed:fine", cora, hidden=16, layers=2)
    assert usermodels_probed.seen == [(2708, 2708)]  # the whole small graph, once
    probe_model("gcn", cora, hidden=16, layers=2)  # the registry's own: nothing to probe
    with pytest.raises(GnnperfError) as info:
        probe_model("usermodels_probed:raises", cora, hidden=16, layers=2)
    message = str(info.value)
    assert message.startswith("--model usermodels_probed:raises: forward ")
    assert "ValueError: no graph of 2708 nodes" in message and "\n" not in message
    assert f"usermodels_probed.py:{PROBED_RAISE_LINE}" in message
    assert isinstance(info.value.__cause__, ValueError)  # --verbose shows its traceback
    with pytest.raises(GnnperfError, match=r"returned shape \(2708, 16\); expected "
                                           r"\(2708, 7\)"):
        probe_model("usermodels_probed:hidden_wide", cora, hidden=16, layers=2)
    # A large graph: its first nodes, with the edges among them.
    usermodels_probed.seen.clear()
    probe_model("usermodels_probed:fine", cora, hidden=16, layers=2, max_nodes=100)
    assert usermodels_probed.seen[0][0] == 100 and usermodels_probed.seen[0][1] <= 100


@pytest.mark.parametrize("case", ["cora rows", "empty rows", "all zeros", "nan and -0",
                                  "float16", "bfloat16"])
def test_a_csr_matrix_from_dense_holds_torchs_own_csr_arrays(cora, case):
    # from_dense finds the stored entries in one scan on CPU; its arrays are
    # those of torch's to_sparse_csr, forward-only or with its transpose.
    dense = {"cora rows": cora.x[:1000],
             "empty rows": torch.tensor([[0.0, 0.0], [1.5, 0.0], [0.0, 0.0], [0.0, -2.0]]),
             "all zeros": torch.zeros(3, 5),
             "nan and -0": torch.tensor([[float("nan"), -0.0, 1.0]]),
             # NumPy scans float16; bfloat16, which NumPy lacks, takes torch's scan.
             "float16": cora.x[:300].half(), "bfloat16": cora.x[:300].bfloat16()}[case]
    reference = dense.to_sparse_csr()
    for transposed in (True, False):
        matrix = CsrMatrix.from_dense(dense, transposed=transposed)
        assert torch.equal(matrix.crow.long(), reference.crow_indices())
        assert torch.equal(matrix.col.long(), reference.col_indices())
        torch.testing.assert_close(matrix.values, reference.values(), equal_nan=True)
        assert matrix.shape == tuple(dense.shape) and (matrix.t_perm is None) is not transposed
        if transposed:  # the transpose's structure is torch's CSC of the same matrix
            csc = dense.to_sparse_csc()
            assert torch.equal(matrix.t_crow.long(), csc.ccol_indices())
            assert torch.equal(matrix.t_col.long(), csc.row_indices())
            torch.testing.assert_close(matrix.values[matrix.t_perm], csc.values(), equal_nan=True)


def test_feature_density_is_counted_on_a_fixed_random_sample_of_rows():
    from gnnperf.models.kernels import DENSITY_SAMPLE_ROWS
    # Every fourth row dense, the rest empty: evenly spaced rows could all
    # land on dense ones; random rows see the share. Small matrices are
    # counted whole, and the count draws nothing from torch's global generator.
    x = torch.zeros(40 * DENSITY_SAMPLE_ROWS, 10)
    x[::4] = 1.0
    state = torch.get_rng_state()
    assert SparseFeatures.density(x) == pytest.approx(0.25, abs=0.06)
    assert SparseFeatures.density(x) == SparseFeatures.density(x)
    assert torch.equal(torch.get_rng_state(), state)
    # Near the cut-off (PubMed's TF-IDF features sit about there) the
    # whole matrix is counted: the decision is the exact one.
    near = torch.zeros(40 * DENSITY_SAMPLE_ROWS, 100)
    near[:, :11] = 1.0
    near[::3, 10] = 0.0  # whole density 0.1 + 0.01 * 2/3, every row alike but one column
    assert SparseFeatures.density(near) == int((near != 0).sum()) / near.numel()
    assert SparseFeatures.density(torch.tensor([[0.0, 2.0], [0.0, 0.0]])) == 0.25
    assert SparseFeatures.density(torch.zeros(0, 3)) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_stored_entries_are_counted_as_torch_counts_them(dtype):
    from gnnperf.models.kernels import _COUNT_CHUNK, _count_stored
    # Across chunk boundaries (NumPy counts a chunk at a time), with NaN (stored)
    # and -0 (not), in a transposed (non-contiguous) view.
    x = torch.zeros(3 * _COUNT_CHUNK + 7)
    x[torch.randint(x.numel(), (5000,), generator=torch.Generator().manual_seed(0))] = 1.5
    x[[0, _COUNT_CHUNK - 1, _COUNT_CHUNK, x.numel() - 1]] = torch.tensor([float("nan"), -0.0, 2.0, 3.0])
    x = x.to(dtype).view(-1, 1).expand(-1, 2).t()
    assert _count_stored(x) == int(torch.count_nonzero(x))


@pytest.mark.parametrize("count", [100, 5000])  # below and above NUMPY_SORT_MIN_KEYS
@pytest.mark.parametrize("num_keys", [7, 1433, 1 << 16, (1 << 16) + 1])
def test_stable_order_is_torchs_stable_argsort(num_keys, count):
    from gnnperf.models.kernels import stable_order
    keys = torch.randint(num_keys, (count,), generator=torch.Generator().manual_seed(num_keys))
    for dtype in (torch.int32, torch.int64):
        assert torch.equal(stable_order(keys.to(dtype), num_keys),
                           torch.argsort(keys.to(dtype), stable=True))


@pytest.mark.parametrize("count", [500, 20000])  # below and above RADIX_ENTRY_ORDER_MIN
@pytest.mark.parametrize("shape", [(600, 500), (3000, 2708), (70000, 10)])
def test_entry_order_is_the_row_major_order_of_distinct_entries(shape, count):
    from gnnperf.models.kernels import entry_order
    generator = torch.Generator().manual_seed(shape[0])
    keys = torch.randint(shape[0] * shape[1], (count,), generator=generator).unique()
    keys = keys[torch.randperm(keys.numel(), generator=generator)]
    row, col = keys // shape[1], keys % shape[1]
    assert torch.equal(entry_order(row, col, shape), torch.argsort(row * shape[1] + col))


def test_from_dense_keeps_the_values_gradient_and_the_scan_takes_vectors_only():
    from gnnperf.models.kernels import stored_positions
    dense = torch.tensor([[0.0, 2.0], [3.0, 0.0]], requires_grad=True)
    matrix = CsrMatrix.from_dense(dense)
    matrix.values.sum().backward()
    assert torch.equal(dense.grad, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="vector"):
        stored_positions(torch.ones(2, 2))
