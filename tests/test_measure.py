import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.measure import Timing, measure_cpu_peak, measure_variant, resolve_device
from gnnperf.variants import TrainConfig


def test_cpu_peak_sees_a_known_200mb_allocation():
    size = 200 * 10 ** 6

    def allocate():
        block = torch.ones(size // 4)  # ones: touched pages count, empty ones would not
        return float(block[-1])

    peak = measure_cpu_peak(allocate)
    assert peak is not None
    assert abs(peak - size) < 0.1 * size


def test_cpu_peak_ignores_a_freed_earlier_allocation():
    big = torch.ones(50 * 10 ** 6)
    del big
    peak = measure_cpu_peak(lambda: torch.ones(10 ** 6))
    assert peak < 20 * 10 ** 6


def test_timing_summary():
    timing = Timing.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert timing.median == 3.0 and timing.minimum == 1.0
    assert timing.q1 == 2.0 and timing.q3 == 4.0
    assert timing.spread == pytest.approx(2 / 3)


def test_cpu_run_reports_no_cuda_figures():
    from gnnperf.data import load_dataset
    data = load_dataset("synthetic:nodes=600,degree=4,features=16,classes=3")
    result = measure_variant("sampled", data, TrainConfig(epochs=6), "cpu", warmup_epochs=2)
    assert result.cuda_peak_bytes is None
    assert result.step_peak_bytes > 0
    assert result.sampled_edges_per_s > 0 and result.seed_nodes_per_s > 0
    assert len(result.epoch_time.samples) == 4 and len(result.losses) == 6
    assert result.compiled_graphs is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_request_without_cuda():
    with pytest.raises(GnnperfError, match="has no CUDA.*use --device cpu"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"
