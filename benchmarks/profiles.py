"""What the suite measures: the profile (sizes and repeats), the variants
and the models, from the environment, never from editing files.

The profile comes from ``$GNNPERF_ASV_PROFILE`` (``quick``, the default, for
CPU CI; ``pr`` for the GPU pull-request gate; ``full`` for GPU runners'
nightly); ``$GNNPERF_ASV_DATASETS`` adds the user's graphs to it
(``cora,ogbn-arxiv,/data/graph.pt``: any name ``gnnperf run --dataset``
takes; one that cannot load here is n/a).

``$GNNPERF_ASV_VARIANTS`` (``baseline,sampled``) narrows every module to
those variants, ``$GNNPERF_ASV_MODELS`` (``gcn,gat``, or a user's
``mypkg.models:build``) the model parameter to those models;
``$GNNPERF_ASV_PATH`` puts the folders a user's model imports from first on
the suite's path (asv passes no PYTHONPATH). The lists are checked when the suite is imported (asv needs
the parameter lists then): an unknown name stops ``asv run`` with one line.

A repository that adopts the suite (gnnperf/asv_init.py) keeps its defaults
of these variables, its own models above all, in ``settings.json`` beside
its shim (:data:`SETTINGS_FILE`): asv passes its caller's environment on,
but a default written there holds for every caller; a variable that is set
wins.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .compat import is_minibatch, registry_models, registry_standard_variants, uses
from .suite import ERRORS, SUITE_SOURCES

PROFILE_ENV = "GNNPERF_ASV_PROFILE"
DATASETS_ENV = "GNNPERF_ASV_DATASETS"
VARIANTS_ENV = "GNNPERF_ASV_VARIANTS"
MODELS_ENV = "GNNPERF_ASV_MODELS"
#: Folders put first on the suite's import path: where a user's model
#: package (``GNNPERF_ASV_MODELS=mypkg.models:build``) lives. asv runs its
#: benchmarks without the caller's PYTHONPATH.
PATH_ENV = "GNNPERF_ASV_PATH"
#: The adopting repository's defaults of the variables above, a JSON object
#: of strings in the suite package's folder: its shim's folder, where
#: :func:`gnnperf.asv_init.write_adopting_suite` writes it (gnnperf's own
#: checkout and the installed ``gnnperf.asv_suite`` have none).
SETTINGS_FILE = "settings.json"


def _settings() -> dict[str, str]:
    package = sys.modules.get(__package__)
    init = getattr(package, "__file__", None)
    path = Path(init).with_name(SETTINGS_FILE) if init else None
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc}); fix it or write it again "
                         f"(gnnperf adopt --force)") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"{path}: give a JSON object of strings, e.g. "
                         f'{{"{MODELS_ENV}": "mypkg.models:build"}}')
    return data


SETTINGS = _settings()


def setting(name: str) -> str:
    """The environment variable :obj:`name` where it is set and not empty,
    else its default in :data:`SETTINGS`, else ``""``."""
    return os.environ.get(name, "").strip() or SETTINGS.get(name, "").strip()


def _user_path() -> None:
    for folder in reversed([f for f in setting(PATH_ENV).split(os.pathsep) if f]):
        if folder not in sys.path:
            sys.path.insert(0, folder)


_user_path()


def _suite_variants() -> list[str]:
    """``$GNNPERF_ASV_VARIANTS`` checked with the registry, else its standard
    variants. A name the registry does not know is a typo (one line, no run)
    when gnnperf comes from the suite's own checkout; on another commit it
    may be a variant that commit lacks, n/a in its benchmarks."""
    try:
        import gnnperf
        from gnnperf.variants import get_variant
    except ImportError:  # an older commit without the registry: every benchmark says n/a
        return registry_standard_variants()
    chosen = [v.strip() for v in setting(VARIANTS_ENV).split(",") if v.strip()]
    own = Path(gnnperf.__file__).resolve().parent == SUITE_SOURCES
    for name in chosen:
        try:
            get_variant(name)
        except Exception as exc:
            if own or not ERRORS.is_unknown_variant(exc):
                raise ValueError(f"{VARIANTS_ENV}: {exc}") from None
    return chosen or registry_standard_variants()


VARIANTS: list[str] = _suite_variants()


def variants_with(technique: str, extra: tuple[str, ...] = ()) -> list[str]:
    """Registry variants that use :obj:`technique`, then :obj:`extra` ones."""
    found = [v for v in VARIANTS if uses(v, technique)]
    found += [v for v in extra if v not in found]
    return found or [technique]  # asv rejects an empty parameter list


#: The variants a history across commits follows (the gate's calibrated
#: cases): full-graph, mini-batch, and the fast path.
HISTORY_VARIANTS = ("baseline", "sampled", "sparse+trimmed+sparse_features")


def history_variants() -> list[str]:
    """:data:`HISTORY_VARIANTS` that the selection keeps, else its first."""
    return [v for v in VARIANTS if v in HISTORY_VARIANTS] or VARIANTS[:1]


def minibatch_variants() -> list[str]:
    """Registry variants whose batches are sampled subgraphs."""
    return [v for v in VARIANTS if is_minibatch(v)] or ["sampled"]


# Scaling graphs: about 10^4 .. 10^7 directed edges, 32 features, 8 classes.
SCALING_GRAPHS = {
    "1e4": "synthetic:nodes=1000,degree=10,features=32,classes=8",
    "1e5": "synthetic:nodes=10000,degree=10,features=32,classes=8",
    "1e6": "synthetic:nodes=100000,degree=10,features=32,classes=8",
    "1e7": "synthetic:nodes=1000000,degree=10,features=32,classes=8",
}


@dataclass(frozen=True)
class Profile:
    r"""Sizes and repeats of one profile.

    Args:
        datasets: Graphs of the per-variant step, memory and throughput benchmarks.
        accuracy_datasets: Graphs of the accuracy benchmark.
        accuracy_epochs: The fixed training budget of the accuracy benchmark.
        scaling: Keys of :data:`SCALING_GRAPHS` in the scaling module.
        scaling_variants: Variants of the scaling module (``None``: all).
        compile_extra: Compiled combinations benchmarked besides the registry's.
        repeat: asv ``repeat`` of the timing benchmarks (min, max, seconds).
        rounds: asv ``rounds`` of the timing benchmarks.
        throughput_epochs: Epochs timed for the time per sampled edge.
        work_datasets: Graphs of the exact work metrics (``None``: the
            gate's, :data:`gnnperf.measure.case.DEFAULT_DATASETS`).
        models: Models of the step-time, CUDA-peak and test-error
            benchmarks (the ``model`` parameter; the others train GCN).
    """
    name: str
    datasets: tuple[str, ...]
    accuracy_datasets: tuple[str, ...]
    accuracy_epochs: int
    scaling: tuple[str, ...]
    scaling_variants: tuple[str, ...] | None
    compile_extra: tuple[str, ...]
    repeat: tuple[int, int, float]
    rounds: int
    throughput_epochs: int
    work_datasets: tuple[str, ...] | None = None
    models: tuple[str, ...] = ("gcn",)



ALL_MODELS = registry_models()

# The quick profile is the CPU smoke run (`asv run --quick`, and the tests'
# forkserver run of it): every class and every variant, each on the smallest
# graph and budget that still gives it a figure, so that the whole run fits a
# CI job (docs/asv.md). The accuracy pairs train in one setup_cache, and the
# work metrics run on Cora, sharing TrainStep's compiled graphs.
PROFILES = {
    "quick": Profile(
        name="quick",
        # Bundled Cora, the tutorial's graph: the compiled variants' graphs are
        # then the ones the tests compile too, so one shared Inductor cache
        # compiles each once (synthetic-cora's edge count made them distinct).
        datasets=("cora",),
        accuracy_datasets=("cora",),
        # The fewest epochs at which every pair still scores above chance.
        accuracy_epochs=5,
        scaling=("1e4", "1e5"),
        scaling_variants=("baseline", "sampled"),
        compile_extra=(),
        repeat=(15, 40, 6.0),
        rounds=2,
        throughput_epochs=3,
        work_datasets=("cora",),  # as datasets: the compiled graphs are the ones TrainStep compiles
        models=ALL_MODELS,  # every model, on the one graph (Cora)
    ),
    # The GPU workflow's pull-request gate, sized to fit a pull request's
    # wait on both commits together (the full profile takes hours per commit:
    # nightly only). It keeps what a PR can break unnoticed: every variant's
    # step time and CUDA peak on Cora and a 10^6-edge graph, and the exact
    # work metrics (selected with asv's --bench in the GPU gate workflow, gpu-gate.yml).
    "pr": Profile(
        name="pr",
        datasets=("cora", "synthetic-1m"),
        accuracy_datasets=("cora",),
        accuracy_epochs=100,
        scaling=("1e4", "1e5", "1e6"),
        scaling_variants=("baseline", "sampled"),
        compile_extra=(),
        repeat=(10, 30, 5.0),
        rounds=2,
        throughput_epochs=3,
    ),
    "full": Profile(
        name="full",
        datasets=("cora", "citeseer", "synthetic-1m"),
        accuracy_datasets=("cora", "citeseer"),
        accuracy_epochs=200,
        scaling=("1e4", "1e5", "1e6", "1e7"),
        scaling_variants=None,
        compile_extra=("sampled+compiled",),
        repeat=(20, 100, 20.0),
        rounds=4,
        throughput_epochs=5,
        models=ALL_MODELS,
    ),
}


def extra_datasets(text: str | None = None) -> tuple[str, ...]:
    """The datasets of ``$GNNPERF_ASV_DATASETS``, by gnnperf's one grammar
    of dataset lists (:func:`gnnperf.data.split_datasets`), each name checked
    (:func:`gnnperf.data.check_dataset_name`: a typo stops the run; a file
    absent on this runner is n/a later)."""
    text = setting(DATASETS_ENV) if text is None else text
    if not text.strip():
        return ()
    try:
        from gnnperf.data import check_dataset_name, split_datasets
    except ImportError:  # a commit before the grammar was public: one name per item
        return tuple(part.strip() for part in text.split(",") if part.strip())
    try:
        return tuple(check_dataset_name(name) for name in split_datasets(text))
    except Exception as exc:
        raise ValueError(f"{DATASETS_ENV}: {exc}") from None


def current_profile() -> Profile:
    name = setting(PROFILE_ENV).lower() or "quick"
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={name!r}: choose one of {', '.join(PROFILES)}")
    profile = PROFILES[name]
    extra = extra_datasets()
    text = setting(MODELS_ENV)
    models = tuple(m.strip() for m in text.split(",") if m.strip())
    try:
        from gnnperf.models import parse_models
    except ImportError:  # a commit before models: GCN alone trains; the others are n/a
        parse_models = None
    if parse_models is not None and models:
        try:  # checked, and spelled as the registry does (GCN, not gcn, is no new case)
            models = tuple(parse_models(text))
        except Exception as exc:
            hint = (f" (asv does not pass PYTHONPATH to its benchmarks: name the folder in "
                    f"{PATH_ENV}, or install the package in asv's environment)"
                    if "cannot import" in str(exc) else "")
            raise ValueError(f"{MODELS_ENV}: {exc}{hint}") from None
    return dataclasses.replace(
        profile, models=models or profile.models,
        datasets=profile.datasets + tuple(d for d in extra if d not in profile.datasets),
        accuracy_datasets=profile.accuracy_datasets + tuple(
            d for d in extra if d not in profile.accuracy_datasets))


PROFILE = current_profile()


def scaling_variants() -> list[str]:
    chosen = PROFILE.scaling_variants
    return list(VARIANTS) if chosen is None else [v for v in chosen if v in VARIANTS] or list(chosen)



# Mini-batch accuracy at scale: saint's normalisation breaks only on graphs
# whose pre-sampling misses edges (none of Cora's do). Full: synthetic-1m's
# shape (10 classes, 1000 training nodes each) with 10% more nodes, so that
# it holds >= 10^6 edges (synthetic-1m itself falls just short). Quick:
# synthetic-10k's 2000-node shape.
SCALE_ACCURACY_GRAPHS = {
    "full": {"synthetic-1.1m": dict(num_nodes=110_000, avg_degree=10.0, num_features=128,
                                    num_classes=10, train_per_class=1000)},
    "quick": {"synthetic-10k": dict(num_nodes=2_000, avg_degree=5.0, num_features=64,
                                    num_classes=8)},
}
SCALE_ACCURACY_EPOCHS = {"full": 60, "quick": 20}


def scale_accuracy_graphs() -> dict[str, dict]:
    """The profile's graphs of :class:`training.SubgraphAccuracyAtScale`
    (the quick one outside the full profile)."""
    return SCALE_ACCURACY_GRAPHS["full" if PROFILE.name == "full" else "quick"]

