"""What the gnnperf asv modules share: the profile, the datasets, the device,
and prepared training runs cached per process.

The profile comes from ``$GNNPERF_ASV_PROFILE`` (``quick``, the default, for CPU
CI; ``pr`` for the GPU pull-request gate; ``full`` for GPU runners' nightly), never from editing files; ``$GNNPERF_ASV_DATASETS``
adds the user's graphs to it (``cora,ogbn-arxiv,/data/graph.pt``: any name
``gnnperf run --dataset`` takes; one that cannot load here is n/a).

``$GNNPERF_ASV_VARIANTS`` (``baseline,sampled``) narrows every module to
those variants, ``$GNNPERF_ASV_MODELS`` (``gcn,gat``) the model parameter to
those models. The lists are checked when the suite is imported: an unknown
name stops ``asv run`` with one line.

Benchmarks come from the working tree while gnnperf comes from each
benchmarked commit, so everything taken from gnnperf is looked up lazily.
n/a (:class:`NotImplementedError`) means "cannot here" for a declared reason
only: a variant or module this commit does not have, gnnperf's
``Unavailable`` (an optional dependency missing, a user's graph absent on
this runner), CUDA-only on CPU, too few cores. Every other exception fails
its benchmark, with its traceback in asv's output: a crash must never look
like a variant an old commit lacks.

asv_runner 0.3.2 runs ``setup`` before every timed call, so ``setup`` only
looks things up: datasets are generated once per ``asv run`` by
``setup_cache`` (written to files so a benchmark process loads only its own
graph, which keeps ``peakmem_`` honest) and training runs are built once per
process and kept in :data:`_RUNS`. :class:`Benchmark` owns every class's
``setup``; runs are built, warmed and batched by ``gnnperf/measure/case.py``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

PROFILE_ENV = "GNNPERF_ASV_PROFILE"
DATASETS_ENV = "GNNPERF_ASV_DATASETS"
VARIANTS_ENV = "GNNPERF_ASV_VARIANTS"
MODELS_ENV = "GNNPERF_ASV_MODELS"
DEVICE_ENV = "GNNPERF_ASV_DEVICE"
THREADS = 1  # measured on the 2-core CI machines: 2 threads ran 5x slower under load

# The registry as of the first commit, for commits whose gnnperf cannot be imported.
_FALLBACK_VARIANTS = ["baseline", "sampled", "amp", "compiled", "checkpointed"]
SUITE_CHECKOUT = Path(__file__).resolve().parents[1]


def _load_suite_module(name: str):
    """``gnnperf/<name>.py`` of this suite's checkout, loaded by path and
    applied to every benchmarked commit's gnnperf: ``case`` (the one way to
    build, warm and fix a batch; it needs only the stable variant API) and
    ``errors`` (the one rule of what is a declared "cannot here")."""
    import importlib.util
    import sys

    path = SUITE_CHECKOUT / "gnnperf" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_gnnperf_asv_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ERRORS = _load_suite_module("errors")
CASES = _load_suite_module("measure/case")


class NotHere(NotImplementedError):
    """The suite's own n/a: what this commit or machine cannot do here."""


def _suite_variants() -> list[str]:
    """``$GNNPERF_ASV_VARIANTS`` checked with the registry, else its standard
    variants. A name the registry does not know is a typo (one line, no run)
    when gnnperf comes from the suite's own checkout; on another commit it
    may be a variant that commit lacks, n/a in its benchmarks."""
    try:
        import gnnperf
        from gnnperf.variants import get_variant
    except ImportError:  # an older commit without the registry: every benchmark says n/a
        return list(_FALLBACK_VARIANTS)
    try:
        from gnnperf.variants import standard_variants
        registry = standard_variants()
    except ImportError:  # commits before the live list had an import-time snapshot
        from gnnperf.variants import STANDARD_VARIANTS as registry
    chosen = [v.strip() for v in os.environ.get(VARIANTS_ENV, "").split(",") if v.strip()]
    own = Path(gnnperf.__file__).resolve().parents[1] == SUITE_CHECKOUT
    for name in chosen:
        try:
            get_variant(name)
        except Exception as exc:
            if own or not ERRORS.is_unknown_variant(exc):
                raise ValueError(f"{VARIANTS_ENV}: {exc}") from None
    return chosen or list(registry)


VARIANTS: list[str] = _suite_variants()


def _registry_variant(name: str):
    try:
        from gnnperf.variants import get_variant
        return get_variant(name)
    except Exception:  # unknown in this commit, or no registry at all
        return None


def uses(name: str, technique: str) -> bool:
    """Whether variant :obj:`name` uses :obj:`technique`, asked of this
    commit's registry (False where it does not know the variant: its
    benchmarks are n/a there)."""
    spec = _registry_variant(name)
    if spec is None:
        return False
    if hasattr(spec, "uses"):
        return spec.uses(technique)
    # Commits before Variant.uses: the parsed variant's techniques.
    return any(t.name == technique for t in spec.techniques)


def is_minibatch(name: str) -> bool:
    """Whether variant :obj:`name` trains on sampled subgraphs, asked of
    this commit's registry."""
    spec = _registry_variant(name)
    if spec is None:
        return False
    if hasattr(spec, "minibatch"):
        return spec.minibatch
    # Commits before Variant.minibatch: a technique that makes batches
    # (sampled alone made them before the attribute existed).
    return any(getattr(t, "makes_batches", t.name == "sampled") for t in spec.techniques)


def variants_with(technique: str, extra: tuple[str, ...] = ()) -> list[str]:
    """Registry variants that use :obj:`technique`, then :obj:`extra` ones."""
    found = [v for v in VARIANTS if uses(v, technique)]
    found += [v for v in extra if v not in found]
    return found or [technique]  # asv rejects an empty parameter list


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


def _registry_models() -> tuple[str, ...]:
    """The registry's built-in models; GCN alone on a commit before them."""
    try:
        from gnnperf.models import MODELS
    except ImportError:
        return ("gcn",)
    return tuple(MODELS)


ALL_MODELS = _registry_models()

# The quick profile is the CPU smoke run (`asv run --quick`, and the tests'
# forkserver run of it): every class and every variant, each on the smallest
# graph and budget that still gives it a figure. Measured on 2 cores (warm
# Inductor cache): 574 s for 36 benchmarks with one asv process per accuracy
# pair (183 s of it); 468 s with every pair trained in one setup_cache (66 s);
# the work metrics on Cora rather than synthetic-10k then share the compiled
# graphs of TrainStep (their setup_cache 49 s -> 25 s). The two cold
# compiles of compile.Compile (about 50 s each) are the largest part left.
PROFILES = {
    "quick": Profile(
        name="quick",
        # Bundled Cora, the tutorial's graph: the compiled variants' graphs are
        # then the ones the tests compile too, so one shared Inductor cache
        # compiles each once (synthetic-cora's edge count made them distinct).
        datasets=("cora",),
        accuracy_datasets=("cora",),
        # 5 epochs: 56 pairs trained in 13 s (warm Inductor cache) instead of
        # 18 s at 10, each still a figure (GCN's test error 24.6%, not chance).
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
    # The GPU workflow's pull-request gate, sized for about 30 minutes on both
    # commits together: the full profile is ~90 timed, 85 peakmem and ~540
    # tracked benchmarks at up to 20 s x 4 rounds each (hours per commit,
    # nightly only). The gate keeps what a PR can break unnoticed: every
    # variant's step time and CUDA peak on Cora and a 10^6-edge graph, and the
    # exact work metrics (selected with asv's --bench in gpu.yml). Estimated
    # from these settings, not yet timed on a GPU runner.
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
    text = os.environ.get(DATASETS_ENV, "") if text is None else text
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
    name = os.environ.get(PROFILE_ENV, "quick").strip().lower() or "quick"
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={name!r}: choose one of {', '.join(PROFILES)}")
    profile = PROFILES[name]
    extra = extra_datasets()
    text = os.environ.get(MODELS_ENV, "")
    models = tuple(m.strip() for m in text.split(",") if m.strip())
    try:
        from gnnperf.models import parse_models
    except ImportError:  # a commit before models: GCN alone trains; the others are n/a
        parse_models = None
    if parse_models is not None and models:
        try:  # checked, and spelled as the registry does (GCN, not gcn, is no new case)
            models = tuple(parse_models(text))
        except Exception as exc:
            raise ValueError(f"{MODELS_ENV}: {exc}") from None
    return dataclasses.replace(
        profile, models=models or profile.models,
        datasets=profile.datasets + tuple(d for d in extra if d not in profile.datasets),
        accuracy_datasets=profile.accuracy_datasets + tuple(
            d for d in extra if d not in profile.accuracy_datasets))


PROFILE = current_profile()


def scaling_variants() -> list[str]:
    chosen = PROFILE.scaling_variants
    return list(VARIANTS) if chosen is None else [v for v in chosen if v in VARIANTS] or list(chosen)


# Environment -----------------------------------------------------------------
def set_threads() -> None:
    """Pins torch's intra-op threads (every ``setup`` calls it: cheap)."""
    if torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)


def device() -> torch.device:
    """``$GNNPERF_ASV_DEVICE`` (``auto`` by default: CUDA when present).

    Called on import too (parameter lists), in the process asv's forkserver
    forks every benchmark from: ``torch.cuda.device_count`` asks NVML and
    leaves no CUDA context behind, where ``torch.cuda.is_available`` would
    initialise the driver and poison every forked child (torch's note on
    fork poisoning). Where NVML cannot load, ``device_count`` falls back to
    the driver itself, and forkserver is then unsafe on that runner: use
    ``--launch-method spawn`` there."""
    name = os.environ.get(DEVICE_ENV, "auto")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.device_count() > 0 else "cpu")
    return torch.device(name)


def require_cuda() -> torch.device:
    dev = device()
    if dev.type != "cuda":
        raise NotHere("CUDA-only metric; this machine runs on CPU")
    return dev


def synchronize(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def growth_exponent(sizes: list[float], seconds: list[float]) -> float:
    r"""The :math:`k` of :math:`t \propto E^k` that fits :obj:`seconds` at
    :obj:`sizes` best (least squares of :math:`\log t` on :math:`\log E`):
    1 for cost linear in the edges, 2 for an accidental quadratic one."""
    import math
    if len(sizes) != len(seconds) or len(set(sizes)) < 2:
        raise ValueError(f"a growth exponent needs times at two sizes or more, got {sizes}")
    if min(sizes) <= 0 or min(seconds) <= 0:
        raise ValueError("sizes and times must be positive")
    xs, ys = [math.log(v) for v in sizes], [math.log(v) for v in seconds]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


def warm_device(dev: torch.device) -> None:
    """The device's one-off first use (on CUDA the context and the cuBLAS and
    cuSPARSE handles, hundreds of MiB of host RSS) before anything is
    measured, so a ``peakmem_`` floor and the benchmarks above it hold the
    same; on a commit without :func:`gnnperf.measure.runner.warm_device`, a CUDA
    context at least."""
    try:
        gnnperf_name("measure.runner.warm_device", "measure.warm_device")(dev)
    except NotImplementedError:
        if dev.type == "cuda":
            torch.ones(1, device=dev).sum().item()


def gnnperf_name(what: str, *older: str):
    """``gnnperf.<module>.<name>``, else the first of :obj:`older` (where a
    commit before the measurement wing had it: ``"measure.warm_device"``
    for ``"measure.runner.warm_device"``), or :class:`NotImplementedError`
    on a commit that has none of them."""
    errors = []
    for path in (what, *older):
        module, _, name = path.rpartition(".")
        try:
            mod = __import__(f"gnnperf.{module}", fromlist=[name])
            return getattr(mod, name)
        except (ImportError, AttributeError) as exc:
            errors.append(exc)
    raise NotHere(f"this commit's gnnperf lacks {what}: {errors[0]}") from None


def variant(name: str):
    """The registry's variant, or :class:`NotImplementedError` where this
    commit does not have it; any other error of the registry fails."""
    get_variant = gnnperf_name("variants.get_variant")
    try:
        return get_variant(name)
    except Exception as exc:
        if ERRORS.is_unknown_variant(exc):  # a variant this commit does not have (yet)
            raise NotHere(f"variant {name!r}: {exc}") from None
        raise


def declared_na(exc: BaseException) -> bool:
    """Whether :obj:`exc` is a declared "cannot here": the suite's own
    :class:`NotHere`, or what ``gnnperf/errors.py`` says is one (gnnperf's
    ``Unavailable``, an unknown variant, torch lacking a kernel on this
    device). A bare :class:`NotImplementedError` from a bug is a failure."""
    return (isinstance(exc, NotHere) or ERRORS.is_unavailable(exc)
            or ERRORS.is_unknown_variant(exc))


def _collections_skip_earlier_cases() -> None:
    """Freezes (``gc.freeze``) every object alive before a ``setup_cache``
    measures its next case: the imports and what earlier cases left (the
    compiler, once one compiled). The collector's full passes during the
    case then walk only its own objects, as in a forked benchmark (see
    :func:`_prepare_forkserver`), so the steps a cache times
    (``scaling.ScalingExponent``'s medians, ``fast_paths``' ratios) run with
    the collector as a forked child has it. Measured on 2 cores, quick
    profile: the largest cache's 49 full collections took 8.5 s of it, 0.17 s
    each; all full collections of a quick run, every process, 25.6 -> 15.3
    CPU-s. An object alive before a case that dies later in a cycle (compile
    artifacts a later ``torch.compiler.reset`` drops) stays allocated until
    the process exits: about 1,400 objects a compiled case. Only in asv's
    ``setup_cache`` processes: :mod:`compile`'s fresh interpreters measure
    what a user's first compile pays, collections included."""
    if sys.argv[1:2] != ["setup_cache"]:
        return
    import gc
    gc.collect()
    gc.freeze()


def measured_or_reason(measure, *args, **kwargs) -> dict:
    """``measure(*args, **kwargs)`` (a dict of figures) or, where it raised,
    ``{"n/a": reason}`` for a declared "cannot here" and ``{"error":
    traceback}`` for anything else: what ``setup_cache`` stores per case, so
    :class:`CachedFigures` fails the benchmarks of a crash and skips the rest."""
    import traceback
    _collections_skip_earlier_cases()
    try:
        return measure(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- sorted into n/a and failed, none hidden
        if declared_na(exc):
            return {"n/a": f"{type(exc).__name__}: {exc}"}
        return {"error": traceback.format_exc()}


def train_config(**overrides):
    return gnnperf_name("variants.TrainConfig")(**overrides)


# Datasets ----------------------------------------------------------------------
NA, FAILED = "!", "!!"  # prefixes of a graph-cache entry that is not a path


def _save_graphs(makers: dict, prefix: str = "graph") -> dict[str, str]:
    """Makes each graph once (``makers[key]()``), saved to a file in asv's
    cache directory; returns key -> path, key -> ``"!reason"`` where
    unavailable here (a user's graph absent on this runner: n/a) or
    ``"!!traceback"`` where it failed otherwise (a corrupt or non-finite
    file: failed)."""
    import traceback
    out = {}
    for key, make in makers.items():
        path = Path.cwd() / f"{prefix}-{len(out)}.pt"
        try:
            torch.save(make(), path)
            out[key] = str(path)
        except Exception as exc:  # noqa: BLE001 -- sorted into n/a and failed
            out[key] = (f"{NA}{type(exc).__name__}: {exc}" if declared_na(exc)
                        else f"{FAILED}{traceback.format_exc()}")
    return out


def _write_graphs(names: dict[str, str]) -> dict[str, str]:
    """:func:`_save_graphs` of datasets by name (:func:`gnnperf.data.load_dataset`)."""
    load_dataset = gnnperf_name("data.load_dataset")
    return _save_graphs({key: (lambda name=name: load_dataset(name))
                         for key, name in names.items()})


def training_datasets_cache(self):
    """``setup_cache`` of the per-variant benchmarks (one per ``asv run``,
    shared by every class using it: asv keys it by this function's line)."""
    names = sorted({*PROFILE.datasets, *PROFILE.accuracy_datasets})
    try:
        return _write_graphs({name: name for name in names})
    except NotImplementedError as exc:
        return {name: f"!{exc}" for name in names}


training_datasets_cache.timeout = 600


def scaling_graphs_cache(self):
    """``setup_cache`` of the scaling module."""
    try:
        return _write_graphs({key: SCALING_GRAPHS[key] for key in PROFILE.scaling})
    except NotImplementedError as exc:
        return {key: f"!{exc}" for key in PROFILE.scaling}


scaling_graphs_cache.timeout = 1200

# Mini-batch accuracy at scale (issue 22): saint's normalisation broke only on
# graphs whose pre-sampling missed edges (4.36% of synthetic-1m's at coverage
# 20; none of Cora's). Full: synthetic-1m's shape (10 classes, 1000 training
# nodes each) with 10% more nodes, so that it holds >= 10^6 edges (1.10M;
# synthetic-1m itself has 998k). Quick: synthetic-10k's 2000-node shape.
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


def scale_accuracy_graph_files() -> dict[str, str]:
    """The graphs of :class:`training.SubgraphAccuracyAtScale`, each generated
    once (seed 0) and saved, as :func:`_write_graphs` does."""
    graphs = scale_accuracy_graphs()
    try:
        spec_class = gnnperf_name("data.SyntheticSpec")
        generate = gnnperf_name("data.synthetic_graph")
    except NotImplementedError as exc:
        return {key: f"{NA}{exc}" for key in graphs}
    return _save_graphs({key: (lambda fields=fields: generate(spec_class(**fields), seed=0))
                         for key, fields in graphs.items()}, prefix="scale-graph")

_DATA: dict[str, object] = {}


def dataset(cache: dict, key: str):
    """The graph (a PyG ``Data``) :obj:`key` from a ``setup_cache`` result
    (kept per process), whichever form this commit's loader saved it in."""
    if key not in _DATA:
        path = cache.get(key) if isinstance(cache, dict) else None
        if path is not None and path.startswith(FAILED):
            raise RuntimeError(f"dataset {key} failed to load:\n{path[len(FAILED):]}")
        if path is None or path.startswith(NA):
            raise NotHere(f"dataset {key} unavailable: {path}")
        _DATA.clear()
        _DATA[key] = CASES.graph_of(torch.load(path, weights_only=False))
    return _DATA[key]


# The case module ----------------------------------------------------------------


def case(dataset_key: str, variant_name: str, warmup_epochs: int = 1, model: str = "gcn",
         **config):
    """The :class:`~gnnperf.measure.case.Case` of a benchmark on this runner's device
    (GCN's has no model override: older commits' configs know none)."""
    return CASES.Case.of(variant_name, dataset_key, model, config=config, device=str(device()),
                         threads=THREADS, warmup_epochs=warmup_epochs)


def check_model(model: str, variant_name: str) -> None:
    """n/a where this commit has no such model, or :obj:`variant_name`
    cannot train it (the registry's reason: sparse and GAT); GCN is every
    commit's model."""
    if model == "gcn":
        return
    get_model = gnnperf_name("models.get_model")
    reason = variant(variant_name).cannot_run_with(get_model(model))
    if reason:
        raise NotHere(reason)


def build_run(cache: dict, key: str, variant_name: str, model: str = "gcn", **config):
    """A fresh training run of :obj:`variant_name` (of :obj:`model`) on
    graph :obj:`key` (:func:`gnnperf.measure.case.build`), or
    :class:`NotImplementedError` where this commit lacks the variant."""
    variant(variant_name)
    check_model(model, variant_name)
    with unavailable_as_na():
        return CASES.build(case(key, variant_name, model=model, **config), dataset(cache, key))


class unavailable_as_na:
    """Turns a declared "cannot here" (:func:`declared_na`: a missing
    optional dependency such as pymetis in this environment) into asv's n/a;
    every other exception goes on and fails the benchmark."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None and declared_na(exc) and not isinstance(exc, NotHere):
            raise NotHere(str(exc)) from None
        return False


_RUNS: dict[tuple, object] = {}


def prepared(cache: dict, key: str, variant_name: str, warm: bool = True,
             model: str = "gcn"):
    """A :class:`~gnnperf.measure.case.PreparedCase` of :obj:`variant_name` (of
    :obj:`model`) on graph :obj:`key`: one epoch's batches materialised
    (sampling stays out of the step time) after one warm-up epoch
    (compilation included), or none when not :obj:`warm`; ``synced_step``
    steps through them. Kept per process."""
    ident = (key, variant_name, warm, model)
    if ident not in _RUNS:
        variant(variant_name)  # n/a where this commit lacks it
        check_model(model, variant_name)
        data = dataset(cache, key)
        _RUNS.clear()
        warm_device(device())  # the device's first use is no step's cost
        with unavailable_as_na():
            _RUNS[ident] = CASES.prepare(case(key, variant_name, 1 if warm else 0, model), data,
                                         fixed_batch=False)
    return _RUNS[ident]


# Base classes --------------------------------------------------------------------
class Benchmark:
    """The base of every gnnperf benchmark, owning asv's ``setup`` (as
    scikit-learn's suite's ``Estimator`` does): it pins the threads, picks
    the device, and turns what a benchmark needs into n/a
    (:class:`NotImplementedError`) before any work, then calls
    :meth:`make` with the cache and the named parameters.

    Attributes:
        needs_cuda: A CUDA-only figure: n/a on CPU runners.
        technique: Applies only to variants that use this technique.
        minibatch: Applies only to mini-batch (sampled-subgraph) variants.
    """
    needs_cuda = False
    technique: str | None = None
    minibatch = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # asv versions a benchmark by the source of its timed method and its
        # setup, which is this base's: the work now sits in make(). The
        # version hashes the source of every class from this one down, so an
        # edit of make() starts a new history as an edit of setup() did.
        import hashlib
        import inspect
        try:
            source = "".join(inspect.getsource(k) for k in reversed(cls.__mro__)
                             if isinstance(k, type) and issubclass(k, Benchmark))
        except (OSError, TypeError):  # no source (frozen): asv's own hash
            return
        cls.version = hashlib.sha256(source.encode()).hexdigest()

    def setup(self, *args):
        set_threads()
        has_cache = hasattr(self, "setup_cache")
        cache, params = (args[0], args[1:]) if has_cache else (None, args)
        named = dict(zip(getattr(self, "param_names", []), params))
        self.device = require_cuda() if self.needs_cuda else device()
        name = named.get("variant")
        if name is not None and self.technique and not uses(name, self.technique):
            raise NotImplementedError(f"applies to {self.technique} variants only")
        if name is not None and self.minibatch and not is_minibatch(name):
            raise NotImplementedError("only mini-batch variants sample edges")
        self.make(cache, **named)

    def make(self, cache, **params) -> None:
        """What the measured methods use (built once per process where costly)."""

    def teardown(self, *args):
        """A prepared case's latest loss must be finite: a benchmark that
        timed NaN arithmetic fails (asv records no result when teardown
        raises), naming the step."""
        prep = getattr(self, "prep", None)
        loss = getattr(prep, "last_loss", None)
        if loss is not None:
            prep.check_loss(loss)


class _CudaStepPeak(Benchmark):  # private: asv discovers no benchmark here itself
    """``torch.cuda.max_memory_allocated`` over one warm step (model and data
    included); n/a on machines without CUDA. A subclass's parameters are the
    graph, then the variant, optionally the model."""

    needs_cuda = True

    def make(self, cache, **params) -> None:
        graph, variant, *model = params.values()
        self.prep = prepared(cache, graph, variant, warm=True, model=(model or ["gcn"])[0])

    def track_cuda_peak_mib(self, cache, *params):
        """MiB over the next step, the peak reset before it (model, data, one batch)."""
        synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.prep.synced_step()
        return torch.cuda.max_memory_allocated(self.device) / 2**20

    track_cuda_peak_mib.unit = "MiB"


class CachedFigures(Benchmark):
    """A benchmark whose figures ``setup_cache`` measured once per run:
    :attr:`figures` is the entry under :meth:`figure_key`; a string or an
    ``n/a`` entry makes the benchmark n/a, an ``error`` entry fails it."""

    def figure_key(self, **params):
        return tuple(params.values())

    def make(self, cache, **params) -> None:
        if isinstance(cache, dict) and "n/a" in cache:
            raise NotImplementedError(cache["n/a"])
        figures = cache.get(self.figure_key(**params), "not measured")
        if isinstance(figures, str):
            raise NotImplementedError(figures)
        if "n/a" in figures:
            raise NotImplementedError(figures["n/a"])
        if "error" in figures:  # fails in setup: the traceback is in asv's output
            raise RuntimeError(f"measurement failed:\n{figures['error']}")
        self.figures = figures

    def figure(self, name: str):
        if "error" in self.figures:
            raise RuntimeError(f"measurement failed: {self.figures['error']}")
        return self.figures[name]


def timed_epoch(run, dev: torch.device) -> tuple[float, int]:
    """Seconds of one full epoch (sampling included) and its edges; its
    losses are checked after the clock stops (no time of NaN arithmetic)."""
    edges = 0
    losses = []
    synchronize(dev)
    start = time.perf_counter()
    for batch in run.batches():
        losses.append(run.step(batch))
        edges += int(batch.num_edges)
    synchronize(dev)
    seconds = time.perf_counter() - start
    CASES.check_losses(losses, "this epoch", 1)
    return seconds, edges


def _prepare_forkserver() -> None:
    """In asv's forkserver (``asv/benchmark.py run_server``), which imports
    the suite once and forks every benchmark from it (asv 0.6 runs each
    ``setup_cache`` as a process of its own, which gets neither):

    - Inductor's CPU vector ISA pick (a probe built and loaded per ISA) is
      made once here instead of in each child that compiles
      (``warm_compiler_for_forks`` of this suite's checkout's
      ``gnnperf/torch_private.py``, whatever the benchmarked commit, so every
      commit and every variant selection get the same resident floor).
      Measured on 2 cores: 2.3 s once, +6 MiB in every child's resident floor
      (the base of the ``peakmem_`` figures); a ``compiled`` child on Cora
      with a warm Inductor cache 4.1 s -> 2.8 s. A pick that fails (no C++
      compiler, an unwritable cache) is left to each child's first compile,
      as before. ``compile.Compile`` measures in fresh interpreters, so its
      figure keeps what a user's first compile pays.
    - Every object alive is frozen before each fork (``gc.freeze``,
      CPython's advice before forking without exec): a child's collections,
      such as the one before each profiled step, skip the 420k objects of
      the suite's import (0.17 s each -> microseconds).

    Discovery, ``setup_cache`` and spawned runs import the suite without
    either (a ``setup_cache`` freezes before each case instead:
    :func:`_collections_skip_earlier_cases`)."""
    if sys.argv[1:2] != ["run_server"]:
        return
    try:
        _load_suite_module("torch_private").warm_compiler_for_forks()
    except Exception as exc:  # noqa: BLE001 -- an optimisation only
        print(f"gnnperf: the forkserver's compiler warm-up failed ({exc}); "
              "each compiling benchmark picks its ISA itself", file=sys.stderr)
    import gc
    gc.collect()
    os.register_at_fork(before=gc.freeze)


_prepare_forkserver()
