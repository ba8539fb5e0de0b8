"""The five variants on real Cora: accuracy, determinism, compilation."""
import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.measure import measure_variant
from gnnperf.variants import (
    STANDARD_VARIANTS,
    TECHNIQUES,
    Technique,
    TrainConfig,
    get_variant,
    standard_variants,
)

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def trained(cora):
    """Each standard variant trained for the tutorial's 200 epochs, seed 0."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = measure_variant(name, cora, TrainConfig(seed=0), CPU)
        return cache[name]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("variant", STANDARD_VARIANTS)
def test_variant_reaches_tutorial_accuracy(trained, variant):
    result = trained(variant)
    assert result.test_acc >= 0.75
    assert result.losses[-1] < result.losses[0] / 3


@pytest.mark.slow
def test_amp_close_to_full_precision(trained):
    assert abs(trained("amp").test_acc - trained("baseline").test_acc) <= 0.015
    assert trained("amp").extra["amp_dtype"] == "bfloat16"


@pytest.mark.slow
def test_checkpointing_recomputes_the_same_training(trained):
    # The dropout RNG state is replayed on recomputation, so nothing changes.
    assert trained("checkpointed").losses == pytest.approx(trained("baseline").losses, rel=1e-5)


def test_same_seed_same_loss_curve(cora):
    config = TrainConfig(epochs=25, seed=11)
    first = measure_variant("baseline", cora, config, CPU).losses
    second = measure_variant("baseline", cora, config, CPU).losses
    other = measure_variant("baseline", cora, TrainConfig(epochs=25, seed=12), CPU).losses
    assert first == second
    assert first != other


@pytest.mark.slow
def test_compiled_has_no_graph_breaks(trained):
    result = trained("compiled")
    assert result.graph_breaks == 0
    assert result.compiled_graphs == 1 and result.recompiles == 0
    assert result.first_epoch_s > result.epoch_time.median  # compilation reported apart


@pytest.mark.slow
def test_compiled_follows_the_eager_loss_curve(trained):
    # On CPU the compiled dropout draws from ATen's generator, so the masks are
    # eager's and only float reassociation differs.
    assert trained("compiled").losses == pytest.approx(trained("baseline").losses, rel=1e-5)


@pytest.mark.slow
def test_sampled_compiled_compiles_once_across_batch_sizes(cora):
    run = get_variant("sampled+compiled").build(cora, TrainConfig(batch_size=32), CPU)
    sizes = set()
    for _ in range(3):
        for batch in run.batches():
            run.step(batch)
            sizes.add(tuple(batch.x.shape))
    assert len(sizes) > 5  # the shapes really changed
    assert run.compile_counter.graphs == 1
    assert run.compile_counter.graph_breaks == 0


def test_combinations_name_canonically_and_train(cora):
    variant = get_variant("compiled+amp+sampled")
    assert variant.name == "sampled+amp+compiled"
    assert get_variant("sampled+checkpointed").name == "sampled+checkpointed"
    run = get_variant("sampled+amp+checkpointed").build(cora, TrainConfig(), CPU)
    losses = [float(run.step(batch)) for batch in run.batches()]
    assert all(torch.isfinite(torch.tensor(losses)))


@pytest.mark.parametrize("name, message", [
    ("turbo", "unknown variant 'turbo'"),
    ("sampled+sampled", "repeats a technique"),
    ("", "unknown variant"),
])
def test_bad_variant_names(name, message):
    with pytest.raises(GnnperfError, match=message):
        get_variant(name)


def test_a_new_technique_is_one_class_and_one_registry_line(cora, monkeypatch):
    class Scaled(Technique):
        name = "scaled"

        def apply(self, run):
            inner = run.forward
            run.forward = lambda *args: 0.5 * inner(*args)

    monkeypatch.setitem(TECHNIQUES, "scaled", Scaled)
    assert "scaled" in standard_variants()
    run = get_variant("sampled+scaled").build(cora, TrainConfig(), CPU)
    assert float(run.step(next(iter(run.batches())))) > 0


@pytest.mark.parametrize("variant, reference", [
    ("sparse", "baseline"), ("sampled+trimmed", "sampled"), ("sparse+checkpointed", "sparse"),
    ("compiled+sampled", "sampled"), ("baseline", "baseline")])
def test_reference_variant(variant, reference):
    from gnnperf.variants import reference_variant
    assert reference_variant(variant) == reference
