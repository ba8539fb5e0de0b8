"""Datasets: real Planetoid graphs read offline through a writable cache, and
deterministic synthetic graphs of any size with a learnable class signal."""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from torch_geometric.data import Data

from gnnperf.errors import GnnperfError

PLANETOID = {"cora": "Cora", "citeseer": "CiteSeer"}
PLANETOID_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
DATA_ENV = "GNNPERF_DATA"
CACHE_ENV = "GNNPERF_CACHE"


@dataclass(frozen=True)
class SyntheticSpec:
    r"""Size and signal of a synthetic node-classification graph.

    Args:
        num_nodes (int): Number of nodes.
        avg_degree (float): Average number of (directed) edges per node after
            symmetrisation; the graph has about :obj:`num_nodes * avg_degree`
            edges.
        num_features (int): Node feature width.
        num_classes (int): Number of classes.
        homophily (float): Probability that an edge joins two nodes of the
            same class.
        hub_exponent (float): Zipf exponent of the source-node popularity:
            :obj:`0` gives an Erdos-Renyi-like graph, :obj:`~1` gives hubs.
        signal (float): Expected distance between two class centroids in
            units of the per-feature noise, whatever the feature width (so
            features alone classify poorly and the graph has to help).
        train_per_class (int): Training nodes per class (Planetoid style).
        num_val (int): Validation nodes.
        num_test (int): Test nodes.
    """
    num_nodes: int
    avg_degree: float
    num_features: int
    num_classes: int
    homophily: float = 0.8
    hub_exponent: float = 0.6
    signal: float = 3.0
    train_per_class: int = 20
    num_val: int = 500
    num_test: int = 1000

    def validate(self) -> None:
        if self.num_nodes < 2 or self.num_features < 1 or self.num_classes < 2:
            raise GnnperfError(
                f"synthetic graph needs num_nodes >= 2, num_features >= 1 and "
                f"num_classes >= 2 (got {self.num_nodes}, {self.num_features}, "
                f"{self.num_classes})")
        if not 0 < self.avg_degree < self.num_nodes:
            raise GnnperfError(
                f"synthetic avg_degree must be in (0, num_nodes), got {self.avg_degree}")
        if not 0.0 <= self.homophily <= 1.0:
            raise GnnperfError(f"homophily must be in [0, 1], got {self.homophily}")
        if self.train_per_class * self.num_classes + self.num_val + self.num_test > self.num_nodes:
            raise GnnperfError(
                f"synthetic graph of {self.num_nodes} nodes is too small for its "
                f"train/val/test split; use more nodes or fewer split nodes")


# Named presets: "synthetic-cora" has Cora's shape (so the default run needs no
# files), the others span the sizes the benchmarks scale over.
SYNTHETIC_PRESETS: dict[str, SyntheticSpec] = {
    "synthetic-cora": SyntheticSpec(2708, 4.0, 1433, 7),
    "synthetic-10k": SyntheticSpec(2_000, 5.0, 64, 8),
    "synthetic-100k": SyntheticSpec(20_000, 5.0, 64, 8),
    # Large graphs get 1000 training nodes per class, so a sampled epoch
    # is several batches of 1024 seeds.
    "synthetic-1m": SyntheticSpec(100_000, 10.0, 128, 10, train_per_class=1000),
    "synthetic-10m": SyntheticSpec(1_000_000, 10.0, 128, 10, train_per_class=1000),
}

_SYNTH_PATTERN = re.compile(r"^synthetic:(?P<args>.+)$")
_SYNTH_KEYS = {"nodes": "num_nodes", "degree": "avg_degree", "features": "num_features",
               "classes": "num_classes", "homophily": "homophily", "hubs": "hub_exponent",
               "signal": "signal"}


def dataset_names() -> list[str]:
    """Names :func:`load_dataset` accepts (besides ``synthetic:k=v,...``)."""
    return [*PLANETOID, *SYNTHETIC_PRESETS]


def parse_synthetic(name: str) -> SyntheticSpec | None:
    """Parses a preset name or ``synthetic:nodes=N,degree=D,features=F,classes=C``."""
    if name in SYNTHETIC_PRESETS:
        return SYNTHETIC_PRESETS[name]
    match = _SYNTH_PATTERN.match(name)
    if match is None:
        return None
    fields: dict[str, float] = {}
    for item in match["args"].split(","):
        key, _, value = item.partition("=")
        if key.strip() not in _SYNTH_KEYS:
            raise GnnperfError(
                f"unknown synthetic graph key {key.strip()!r}; use "
                f"{', '.join(_SYNTH_KEYS)} as in synthetic:nodes=10000,degree=10")
        try:
            fields[_SYNTH_KEYS[key.strip()]] = float(value)
        except ValueError:
            raise GnnperfError(f"synthetic graph value {item!r} is not a number") from None
    missing = {"num_nodes", "avg_degree", "num_features", "num_classes"} - fields.keys()
    if missing:
        raise GnnperfError(f"synthetic graph {name!r} lacks {', '.join(sorted(missing))}; "
                           f"give nodes, degree, features and classes")
    for key in ("num_nodes", "num_features", "num_classes"):
        fields[key] = int(fields[key])
    num_nodes = int(fields["num_nodes"])
    # Small graphs get a proportionally small split instead of failing.
    num_classes = int(fields["num_classes"])
    split = {}
    if 20 * num_classes + 1500 > num_nodes:
        split = dict(train_per_class=max(1, num_nodes // (10 * num_classes)),
                     num_val=num_nodes // 10, num_test=num_nodes // 5)
    return SyntheticSpec(**fields, **split)


def synthetic_graph(spec: SyntheticSpec, seed: int = 0) -> Data:
    """Generates a deterministic homophilous graph with class-correlated features.

    Edges are drawn vectorised: a source by Zipf-like popularity (which makes
    hubs), a target of the same class with probability :obj:`homophily` and
    any node otherwise; the graph is then symmetrised and deduplicated.
    """
    spec.validate()
    gen = torch.Generator().manual_seed(seed)
    n, c = spec.num_nodes, spec.num_classes
    y = torch.randint(0, c, (n,), generator=gen)
    # Popularity is assigned in a random node order so hubs are not all low ids.
    rank = torch.randperm(n, generator=gen).double() + 1.0
    popularity = rank.pow(-spec.hub_exponent)
    num_draws = int(n * spec.avg_degree / 2)
    src = _draw(popularity, num_draws, gen)

    by_class = torch.argsort(y, stable=True)
    class_count = torch.bincount(y, minlength=c)
    class_start = torch.cumsum(class_count, 0) - class_count
    same = torch.rand(num_draws, generator=gen) < spec.homophily
    u = torch.rand(num_draws, generator=gen, dtype=torch.float64)
    src_class = y[src]
    in_class = by_class[class_start[src_class] + (u * class_count[src_class]).long()]
    anywhere = (u * n).long()
    dst = torch.where(same, in_class, anywhere)

    keep = src != dst
    edge_index = torch.stack([torch.cat([src[keep], dst[keep]]),
                              torch.cat([dst[keep], src[keep]])])
    edge_index = torch.unique(edge_index, dim=1)  # also sorts by (row, col)

    centroids = torch.randn(c, spec.num_features, generator=gen) * (
        spec.signal / (2 * spec.num_features) ** 0.5)
    x = centroids[y] + torch.randn(n, spec.num_features, generator=gen)
    data = Data(x=x, edge_index=edge_index, y=y, num_nodes=n)
    _planetoid_split(data, spec, gen)
    return data


def _draw(weights: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    # Inverse-CDF sampling: torch.multinomial caps categories at 2^24.
    cdf = torch.cumsum(weights, 0)
    u = torch.rand(count, generator=gen, dtype=torch.float64) * cdf[-1]
    return torch.searchsorted(cdf, u).clamp_(max=weights.numel() - 1)


def _planetoid_split(data: Data, spec: SyntheticSpec, gen: torch.Generator) -> None:
    n = spec.num_nodes
    order = torch.randperm(n, generator=gen)
    y_ordered = data.y[order]
    train = torch.zeros(n, dtype=torch.bool)
    for cls in range(spec.num_classes):
        train[order[y_ordered == cls][: spec.train_per_class]] = True
    rest = order[~train[order]]
    val = torch.zeros(n, dtype=torch.bool)
    test = torch.zeros(n, dtype=torch.bool)
    val[rest[: spec.num_val]] = True
    test[rest[spec.num_val: spec.num_val + spec.num_test]] = True
    data.train_mask, data.val_mask, data.test_mask = train, val, test


def default_data_root() -> Path | None:
    """The Planetoid root from ``$GNNPERF_DATA``, else ``../shared/data/planetoid``
    next to the project checkout or the working directory, if present."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    here = Path(__file__).resolve().parent.parent
    for base in (here, Path.cwd()):
        candidate = base.parent / "shared" / "data" / "planetoid"
        if candidate.is_dir():
            return candidate
    return None


def cache_dir() -> Path:
    """The writable cache (``$GNNPERF_CACHE``, else ``~/.cache/gnnperf``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gnnperf"


def load_planetoid(name: str, root: str | os.PathLike | None = None) -> Data:
    """Loads Cora or CiteSeer from raw Planetoid files, never downloading.

    The raw files under ``root/<Name>/raw`` (possibly read-only) are copied to
    the writable cache, where PyG's :class:`~torch_geometric.datasets.Planetoid`
    writes its processed file.
    """
    from torch_geometric.datasets import Planetoid

    pyg_name = PLANETOID[name]
    source_root = Path(root) if root is not None else default_data_root()
    hint = (f"put the Planetoid raw files ind.{name}.{{{','.join(PLANETOID_SUFFIXES)}}} in "
            f"<root>/{pyg_name}/raw and pass --root <root> or set {DATA_ENV}")
    if source_root is None:
        raise GnnperfError(f"no data root for {name}: {hint}")
    raw_src = source_root / pyg_name / "raw"
    missing = [s for s in PLANETOID_SUFFIXES if not (raw_src / f"ind.{name}.{s}").is_file()]
    if missing:
        raise GnnperfError(f"{raw_src} lacks ind.{name}.{missing[0]}: {hint}")

    cache_root = cache_dir() / "planetoid"
    raw_dst = cache_root / pyg_name / "raw"
    processed = cache_root / pyg_name / "processed"
    raw_dst.mkdir(parents=True, exist_ok=True)
    changed = False
    for suffix in PLANETOID_SUFFIXES:
        src, dst = raw_src / f"ind.{name}.{suffix}", raw_dst / f"ind.{name}.{suffix}"
        if not dst.is_file() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
            changed = True
    if changed:
        shutil.rmtree(processed, ignore_errors=True)
    try:
        dataset = Planetoid(str(cache_root), pyg_name)
    except Exception as exc:  # PyG raises pickle/numpy/struct errors on bad bytes
        shutil.rmtree(processed, ignore_errors=True)
        raise GnnperfError(
            f"cannot read {name} raw files in {raw_src} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'corrupt data'}); "
            f"replace them with intact Planetoid files") from exc
    data = dataset[0]
    data.name = name
    return data


def load_dataset(name: str, root: str | os.PathLike | None = None, seed: int = 0) -> Data:
    r"""Loads a dataset by name.

    Args:
        name (str): ``cora``, ``citeseer``, a synthetic preset
            (``synthetic-cora``, ``synthetic-1m``, ...) or
            ``synthetic:nodes=N,degree=D,features=F,classes=C``.
        root (str, optional): Planetoid data root (default: ``$GNNPERF_DATA``
            or ``../shared/data/planetoid``).
        seed (int): Seed of synthetic graphs.
    """
    key = name.lower()
    if key in PLANETOID:
        return load_planetoid(key, root)
    spec = parse_synthetic(key)
    if spec is None:
        raise GnnperfError(
            f"unknown dataset {name!r}; choose one of {', '.join(dataset_names())} "
            f"or synthetic:nodes=N,degree=D,features=F,classes=C")
    data = synthetic_graph(spec, seed)
    data.name = key
    return data
