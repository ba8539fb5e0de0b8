"""gnnperf: what each GCN training optimisation buys, measured honestly."""
from gnnperf.data import SyntheticSpec, load_dataset, synthetic_graph
from gnnperf.errors import GnnperfError
from gnnperf.measure import VariantResult, measure_variant
from gnnperf.models import GCN, normalize_graph
from gnnperf.sampling import VectorizedNeighborSampler, make_neighbor_loader
from gnnperf.variants import (
    STANDARD_VARIANTS,
    TECHNIQUES,
    Technique,
    TrainConfig,
    TrainingRun,
    get_variant,
)

__version__ = "0.1.0"

__all__ = [
    "GCN", "GnnperfError", "STANDARD_VARIANTS", "SyntheticSpec", "TECHNIQUES", "Technique",
    "TrainConfig", "TrainingRun", "VariantResult", "VectorizedNeighborSampler", "get_variant",
    "load_dataset", "make_neighbor_loader", "measure_variant", "normalize_graph",
    "synthetic_graph",
]
