"""gnnperf: what each GNN training optimisation buys, measured honestly.

Importing it changes no process state (environment, warning filters,
threads) and loads nothing heavy: the public names below load their module
on first use (PEP 562), so ``gnnperf`` on the command line can set up the
process (:func:`gnnperf.cli.main`) before torch is imported. The one
registration gnnperf makes is its CSR product op, when
:mod:`gnnperf.models.kernels` is first imported (guarded against a second).
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_PUBLIC = {
    **dict.fromkeys(("Dataset", "SyntheticSpec", "load_dataset", "synthetic_graph"),
                    "gnnperf.data"),
    "GnnperfError": "gnnperf.errors",
    **dict.fromkeys(("SamplerThroughput", "VariantResult", "measure_sampler", "measure_variant"),
                    "gnnperf.measure.runner"),
    **dict.fromkeys(("GAT", "GCN", "GIN", "GraphSAGE", "MODELS", "ModelSpec", "get_model",
                     "normalize_graph"), "gnnperf.models"),
    **dict.fromkeys(("VectorizedNeighborSampler", "make_neighbor_loader"), "gnnperf.sampling"),
    **dict.fromkeys(("TECHNIQUES", "Technique", "TrainConfig", "TrainingRun", "Variant",
                     "get_variant", "reference_variant", "standard_variants"),
                    "gnnperf.variants"),
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'gnnperf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
