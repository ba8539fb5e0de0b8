"""gnnperf: what each GNN training optimisation buys, measured honestly."""
import os

# The CPU step peak comes from torch.profiler memory events; without these,
# every profiled step prints kineto's start/stop lines and a c10 warning.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

from gnnperf.data import SyntheticSpec, load_dataset, synthetic_graph
from gnnperf.errors import GnnperfError
from gnnperf.measure.runner import SamplerThroughput, VariantResult, measure_sampler, measure_variant
from gnnperf.models import GAT, GCN, GIN, MODELS, GraphSAGE, ModelSpec, get_model, normalize_graph
from gnnperf.sampling import VectorizedNeighborSampler, make_neighbor_loader
from gnnperf.variants import (
    STANDARD_VARIANTS,
    TECHNIQUES,
    Technique,
    TrainConfig,
    TrainingRun,
    get_variant,
    reference_variant,
    standard_variants,
)

__version__ = "0.1.0"

__all__ = [
    "GAT", "GCN", "GIN", "GnnperfError", "GraphSAGE", "MODELS", "ModelSpec", "STANDARD_VARIANTS", "SamplerThroughput", "SyntheticSpec",
    "TECHNIQUES", "Technique", "TrainConfig", "TrainingRun", "VariantResult",
    "VectorizedNeighborSampler", "get_model", "get_variant", "load_dataset", "make_neighbor_loader",
    "measure_sampler", "measure_variant", "normalize_graph", "reference_variant",
    "standard_variants", "synthetic_graph",
]
