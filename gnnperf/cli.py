"""``gnnperf run``: the variant comparison from the command line."""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gnnperf.cli_help import (EXIT_CODES, HelpFormatter, OneLineParser, add_verbose,
                              command_parser)
from gnnperf.errors import GnnperfError, is_unavailable
from gnnperf.io import check_output, write_atomic

if TYPE_CHECKING:
    from gnnperf.variants import TrainConfig

from gnnperf.measure.convergence import DEFAULT_TARGET_SHARE

DEFAULT_DATASET = "cora"  # the tutorial's graph, bundled with the package
# The comparison's epochs: a quarter of the PyG example's 200 (TrainConfig's,
# what the benchmarks train), so that the main job takes a minute.
RUN_EPOCHS = 50
DATASET_HELP = ("cora, citeseer (bundled), synthetic-cora, synthetic-1m, ..., "
                "synthetic:nodes=N,degree=D,features=F,classes=C, a graph.pt file (a saved PyG "
                "Data), pyg:Class[/name] (torch_geometric.datasets) or ogbn-<name> (OGB)")
ROOT_HELP = ("data root: Planetoid raw files in <root>/<Name>/raw, pyg: datasets in "
             "<root>/<Class>, OGB in <root>/ogbn_<name> (default: $GNNPERF_DATA, else the "
             "bundled Cora/CiteSeer and ~/.cache/gnnperf/datasets)")


def _add_dataset_options(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--dataset", default=default, help=f"{DATASET_HELP} (default: %(default)s)")
    parser.add_argument("--root", help=ROOT_HELP)
    parser.add_argument("--download", action="store_true",
                        help="let pyg: and OGB datasets download missing files into the root")


def _integers(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes {what}; got {text!r}") from None


def _fanout(text: str) -> tuple[int, ...]:
    """``--fanout``: its range (-1 for all neighbours) is TrainConfig's check."""
    return _integers(text, "comma-separated positive integers (e.g. 15,10), -1 for all "
                           "neighbours")


def _seed_list(text: str) -> tuple[int, ...]:
    return _integers(text, "comma-separated integers >= 0 (e.g. 0,1,2)")


def _number(text: str) -> float:
    """A float option's value, not NaN: every comparison with NaN is false,
    so a range check written as ``lr <= 0`` lets it through to training."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"takes a number; got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from gnnperf.variants import TrainConfig, standard_variants
    defaults = TrainConfig()
    from gnnperf import __version__
    parser = OneLineParser(prog="gnnperf", description=__doc__, epilog=EXIT_CODES,
                           formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_verbose(parser, command=False)
    sub = parser.add_subparsers(dest="command", required=True)
    from gnnperf.models import DEFAULT_MODEL, MODELS
    run = command_parser(sub, "run", run_command, help="train and compare GNN training variants")
    run.add_argument("--variants",
                     help="comma-separated: baseline or techniques joined by + (default: "
                          f"{','.join(standard_variants())}; with --model, those that "
                          f"combine with each model, the others n/a with the reason)")
    run.add_argument("--model", default=DEFAULT_MODEL,
                     help=f"comma-separated models: {', '.join(MODELS)}, or your own as "
                          f"module:function (a function of in_channels, hidden, out_channels, "
                          f"layers returning a module whose forward takes x, edge_index) "
                          f"(default: %(default)s)")
    _add_dataset_options(run, DEFAULT_DATASET)
    run.add_argument("--device", default="auto", help="auto, cpu or cuda[:N] (default: auto)")
    run.add_argument("--epochs", type=int, default=RUN_EPOCHS,
                     help="training epochs, the warm-up ones included (default: %(default)s: "
                          "a steady median and Cora's time to the default target; raise it "
                          "for final accuracy or slower learners)")
    run.add_argument("--warmup", type=int, default=3,
                     help="epochs before timing (>= 2): the first, timed apart, includes compilation; "
                          "the last measures memory (default: 3)")
    run.add_argument("--hidden", type=int, default=defaults.hidden, help="hidden width")
    run.add_argument("--layers", type=int, default=defaults.layers, help="graph conv layers")
    run.add_argument("--dropout", type=_number, default=defaults.dropout,
                     help="dropout probability")
    run.add_argument("--lr", type=_number, default=defaults.lr, help="Adam learning rate")
    run.add_argument("--fanout", type=_fanout, default=defaults.fanout,
                     help="sampled variants: neighbours per hop, comma-separated (the last "
                          "repeats for deeper models; default: "
                          f"{','.join(map(str, defaults.fanout))})")
    run.add_argument("--batch-size", type=int, default=defaults.batch_size,
                     help="sampled variants: seed nodes per mini-batch")
    run.add_argument("--sampler", default=defaults.sampler, choices=["auto", "native", "vectorized"],
                     help="neighbour sampler: native (PyG's, needs pyg-lib or torch-sparse), "
                          "vectorized (gnnperf's torch one) or auto (native where present, on CPU "
                          "graphs)")
    run.add_argument("--saint-roots", type=int, default=defaults.saint_roots,
                     help="saint: random walks per batch (default: max(500, N / 5))")
    run.add_argument("--saint-walk-length", type=int, default=defaults.saint_walk_length,
                     help="saint: steps per walk (default: %(default)s)")
    run.add_argument("--saint-coverage", type=_number, default=defaults.saint_coverage,
                     help="saint: pre-sample until this many x num_nodes nodes were drawn, "
                          "for the normalisation (default: %(default)s)")
    run.add_argument("--amp-dtype", default=defaults.amp_dtype,
                     help="amp: auto (bf16 where the device has it natively, else fp16 with "
                          "a gradient scaler), bf16 or fp16 (default: %(default)s)")
    run.add_argument("--saint-norm", default=defaults.saint_norm,
                     help="saint: aggregation normalisation, paper (Zeng et al.: C_v / C_uv, v "
                          "the aggregating node) or pyg (PyG's C_u / C_uv, u the source) "
                          "(default: %(default)s)")
    run.add_argument("--saint-seen-edges", type=_number, default=defaults.saint_seen_edges,
                     help="saint: pre-sample past --saint-coverage until this share of the "
                          "edges was drawn --saint-min-count times (default: %(default)s)...")
    run.add_argument("--saint-min-count", type=int, default=defaults.saint_min_count,
                     help="saint: see --saint-seen-edges (default: %(default)s)")
    run.add_argument("--saint-max-coverage", type=_number, default=defaults.saint_max_coverage,
                     help="saint: ...or this many x num_nodes nodes were (default: %(default)s)")
    run.add_argument("--cluster-parts", type=int, default=defaults.cluster_parts,
                     help="cluster: METIS parts (default: %(default)s)")
    run.add_argument("--cluster-batch", type=int, default=defaults.cluster_batch,
                     help="cluster: parts per batch (default: %(default)s)")
    run.add_argument("--seed", type=int,
                     help=f"seed of the weights, dropout, sampling and synthetic graphs "
                          f"(default: {defaults.seed})")
    run.add_argument("--seeds", type=_seed_list,
                     help="train every variant once per seed (e.g. 0,1,2): time to accuracy "
                          "as the median and spread over them; the table's other figures are "
                          "the first seed's, the synthetic graph is the first seed's "
                          "(replaces --seed)")
    run.add_argument("--target-acc", type=_number,
                     help="time to accuracy: the validation accuracy to reach (default: "
                          "--target-share of the reference's best)")
    run.add_argument("--target-share", type=_number, default=DEFAULT_TARGET_SHARE,
                     help="time to accuracy without --target-acc: this share of the "
                          "reference variant's best validation accuracy (default: %(default)s)")
    run.add_argument("--no-time-to-accuracy", action="store_true",
                     help="no evaluation after every epoch, no time to accuracy: for a graph "
                          "whose full-graph evaluation costs more than its epochs")
    run.add_argument("--threads", type=int, default=1,
                     help="torch CPU threads (default: 1, the steadiest on small machines)")
    run.add_argument("--world-size", type=int, default=None,
                     help="ddp variants: local ranks to launch, each a process in one group "
                          "(NCCL on CUDA: 1 is a real one-GPU group); without it they train in "
                          "this process as a world of one (gloo, in-process); under torchrun "
                          "its world is used instead")
    run.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"],
                     help="ddp process-group backend (auto: NCCL on CUDA, gloo on CPU; "
                          "default: %(default)s)")
    run.add_argument("--json", type=Path, help="write results and environment to this file")
    run.add_argument("--plot", type=Path,
                     help="write the comparison chart (PNG) here: time vs memory, and time "
                          "and peak memory per variant as bars")
    run.add_argument("--timeline", type=Path,
                     help="write memory over training iterations (PNG), a line per variant")
    run.add_argument("--reference", default="baseline",
                     help="variant the speed-up and memory ratios compare to (default: baseline)")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--tune-malloc", action="store_true",
                     help="keep freed memory in glibc's heap (fewer page faults; recorded)")

    sampler = command_parser(sub, "sampler", sampler_command, help="neighbor-sampler throughput (edges/s)")
    _add_dataset_options(sampler, "synthetic-1m")
    sampler.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    sampler.add_argument("--fanout", type=_fanout, default=defaults.fanout,
                         help="neighbours per hop, comma-separated (default: "
                              f"{','.join(map(str, defaults.fanout))})")
    sampler.add_argument("--batch-size", type=int, default=1024, help="seed nodes per batch")
    sampler.add_argument("--batches", type=int, default=30, help="batches timed")
    sampler.add_argument("--seed", type=int, default=0,
                         help="seed of the synthetic graph and the sampled batches")
    sampler.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    sampler.add_argument("--json", type=Path, help="write the result and environment here")
    sampler.add_argument("--tune-malloc", action="store_true",
                         help="keep freed memory in glibc's heap (fewer page faults; recorded)")
    roofs = command_parser(sub, "roofs", roofs_command, help="this machine's roofs: peak GEMM FLOP/s, copy and "
                                         "gather bandwidth (measured once, cached)")
    roofs.add_argument("--device", default="auto", help="auto, cpu or cuda[:N] (default: auto)")
    roofs.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    roofs.add_argument("--refresh", action="store_true", help="measure again, not from the cache")
    roofs.add_argument("--json", type=Path, help="write the roofs here")
    doctor = command_parser(sub, "doctor", doctor_command,
                            help="check that this machine runs the suite right")
    doctor.add_argument("--device", default="auto", help="auto, cpu or cuda[:N] (default: auto)")
    doctor.add_argument("--json", type=Path, help="write the report here")
    doctor.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    doctor.add_argument("--model", default="gcn",
                        help="comma-separated models the variants train (default: gcn)")
    doctor.add_argument("--skip-asv", action="store_true",
                        help="leave out the asv check (tools/gpu_check.sh runs asv itself)")
    # Every other command, each registered by the module that runs it.
    from gnnperf import asv_init
    from gnnperf.ci import adopt, nightly, policy
    from gnnperf.gate import cli as gate_cli
    from gnnperf import history
    for wing in (gate_cli, history, asv_init, adopt, policy, nightly):
        wing.add_parser(sub)
    return parser


@dataclass
class RunPlan:
    """What ``gnnperf run`` will measure, every option checked before the
    dataset loads and anything trains: the configuration, the models, the
    parsed variants, the (model, variant) pairs that run and the pairs that
    cannot (label -> the registry's reason), the reference variant and the
    seeds each pair trains with."""
    config: "TrainConfig"
    models: list[str]
    specs: list["Variant"]
    pairs: list[tuple[str, "Variant"]]
    cannot: dict[str, str]
    reference: str
    seeds: list[int]

    @property
    def variants(self) -> list[str]:
        return [spec.name for spec in self.specs]


def _train_config(args: argparse.Namespace):
    from gnnperf.variants import TrainConfig
    return TrainConfig(epochs=args.epochs, hidden=args.hidden, layers=args.layers,
                       dropout=args.dropout, lr=args.lr, fanout=args.fanout,
                       batch_size=args.batch_size, sampler=args.sampler,
                       saint_roots=args.saint_roots, saint_walk_length=args.saint_walk_length,
                       saint_coverage=args.saint_coverage, saint_norm=args.saint_norm,
                       amp_dtype=args.amp_dtype, saint_seen_edges=args.saint_seen_edges,
                       saint_min_count=args.saint_min_count,
                       saint_max_coverage=args.saint_max_coverage,
                       cluster_parts=args.cluster_parts, cluster_batch=args.cluster_batch,
                       seed=_seeds(args)[0])


def plan_run(args: argparse.Namespace) -> RunPlan:
    """The options of ``gnnperf run`` checked, in one line each, before the
    dataset loads and any variant trains: all but the device, the backend
    and torchrun's world, which :func:`run_command` resolves next (still
    before the dataset loads)."""
    from gnnperf.data import check_dataset_name, known_num_nodes
    from gnnperf.measure.runner import result_label
    from gnnperf.models import parse_models
    from gnnperf.measure.convergence import check_target
    from gnnperf.variants import get_variant, model_pairs, standard_variants

    config = _train_config(args)
    models = parse_models(args.model)
    config.validate()
    seeds = _seeds(args)
    check_target(args.target_acc, args.target_share)
    if args.no_time_to_accuracy and (args.target_acc is not None
                                     or args.target_share != DEFAULT_TARGET_SHARE):
        raise GnnperfError("--target-acc and --target-share set time to accuracy's target; "
                           "drop them or drop --no-time-to-accuracy")
    explicit = args.variants is not None
    specs = [get_variant(name) for name in
             (args.variants.split(",") if explicit else standard_variants()) if name.strip()]
    if not specs:
        raise GnnperfError("no variants given; e.g. --variants baseline,sampled")
    # A pair that cannot train is an n/a row; a named variant that runs
    # with none of the models is an error (model_pairs).
    pairs, cannot = model_pairs(specs, models, named=explicit)
    cannot = {result_label(name, model): why for (name, model), why in cannot.items()}
    check_dataset_name(args.dataset)
    try:
        reference = get_variant(args.reference).name
    except GnnperfError as exc:
        raise GnnperfError(f"--reference: {exc}") from None
    if not 2 <= args.warmup < args.epochs:
        raise GnnperfError(f"--warmup must be in [2, --epochs) (the first epoch compiles, the "
                           f"last warm-up one measures memory), got {args.warmup}")
    check_output(args.json, "--json")
    check_output(args.plot, "--plot")
    check_output(args.timeline, "--timeline")
    if args.world_size is not None and args.world_size < 1:
        raise GnnperfError(f"--world-size must be >= 1, got {args.world_size}")
    if args.world_size is not None and not any(spec.data_parallel for spec in specs):
        names = ",".join(spec.name for spec in specs)
        raise GnnperfError(f"--world-size {args.world_size} applies to ddp variants and none is "
                           f"given; add one (e.g. --variants {names},ddp) or drop --world-size")
    if config.amp_dtype != "auto" and not any(spec.uses("amp") for spec in specs):
        raise GnnperfError(f"--amp-dtype {config.amp_dtype} applies to amp variants and none "
                           f"is given; add one (e.g. --variants amp) or drop --amp-dtype")
    if not math.isfinite(config.lr):
        raise GnnperfError(f"--lr must be a finite number > 0, got {config.lr}")
    plan = RunPlan(config, models, specs, pairs, cannot, reference, seeds)
    _check_against_graph(plan, known_num_nodes(args.dataset, args.root), args.dataset)
    return plan


def _check_against_graph(plan: RunPlan, num_nodes: int | None, graph: str) -> None:
    """The options bounded by the graph's size: before it loads where its
    node count is known without loading it (``num_nodes``), else once
    loaded, before anything trains."""
    if any(spec.uses("cluster") for spec in plan.specs):
        from gnnperf.variants.cluster import check_cluster_options
        check_cluster_options(plan.config, num_nodes, graph)


def _seeds(args: argparse.Namespace) -> list[int]:
    """The seeds every variant trains with: ``--seeds``, else ``--seed``."""
    if getattr(args, "seeds", None) is None:
        from gnnperf.variants import TrainConfig
        return [args.seed if args.seed is not None else TrainConfig().seed]
    if args.seed is not None:
        raise GnnperfError("give --seed or --seeds, not both (--seeds 0,1,2 replaces --seed)")
    if any(seed < 0 for seed in args.seeds):
        raise GnnperfError(f"--seeds must be >= 0, got {','.join(map(str, args.seeds))}")
    if len(set(args.seeds)) != len(args.seeds):
        raise GnnperfError(f"--seeds {','.join(map(str, args.seeds))} repeats a seed; "
                           f"give each once")
    return list(args.seeds)


def run_command(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gnnperf import report
    from gnnperf.data import load_dataset
    from gnnperf.fingerprint import tune_allocator
    from gnnperf.measure.case import freeze_collector
    from gnnperf.measure.runner import result_label, set_threads, with_roofline
    from gnnperf.models import probe_model

    plan = plan_run(args)
    device, backend, torchrun, rank0 = _join_world(args)
    plan = _drop_what_cannot_run_on(plan, device, rank0)
    set_threads(args.threads)
    tuned = args.tune_malloc and tune_allocator()
    # One graph for every seed: the seeds vary the weights, dropout and sampling.
    dataset = load_dataset(args.dataset, args.root, seed=plan.seeds[0], download=args.download)
    _check_against_graph(plan, dataset.num_nodes, dataset.name)
    # A user's model that cannot run on this graph is refused here, in one
    # line, rather than as a traceback out of the first variant's step.
    for model in dict.fromkeys(model for model, _ in plan.pairs):
        probe_model(model, dataset.graph, plan.config.hidden, plan.config.layers, device)
    measure = _PairMeasurer(args, plan, dataset, device, torchrun, rank0)
    seeds = "seed" + (f"s {','.join(map(str, plan.seeds))}" if len(plan.seeds) > 1
                      else f" {plan.seeds[0]}")
    print(f"dataset {dataset.name}: {dataset.num_nodes} nodes, {dataset.num_edges} edges, "
          f"{dataset.num_features} features; model {', '.join(plan.models)}; device {device}; "
          f"{args.epochs} epochs "
          f"({args.warmup} warm-up); {seeds}; {set_threads(None)} thread(s)",
          file=sys.stderr)
    env, roofs, run_config = _run_metadata(args, plan, dataset, device, tuned, backend, torchrun)
    results, failures, unavailable = [], {}, dict(plan.cannot)

    def first_seed() -> list:
        return [r for r in results if r.seed == plan.seeds[0]]

    def save(complete: bool) -> None:
        # Rewritten atomically after every variant: a crash or a kill keeps
        # what finished, in a valid document marked incomplete.
        if args.json:
            payload = report.to_json(results, env, run_config, failures, plan.reference,
                                     complete, unavailable, accuracy=time_to_accuracy)
            write_atomic(args.json, payload.encode())

    time_to_accuracy = None
    save(complete=False)
    # What is alive now (torch, PyG, the graph) lives as long as the run:
    # frozen once, each variant's collections skip it (release_memory).
    freeze_collector()
    progress = tqdm(total=len(plan.pairs) * args.epochs * len(plan.seeds), unit="epoch",
                    disable=args.no_progress, file=sys.stderr)
    for seed in plan.seeds:
        for model, variant in plan.pairs:
            label = result_label(variant.name, model)
            if label in failures or label in unavailable:
                progress.update(args.epochs)  # failed or n/a with an earlier seed
                continue
            progress.set_description(label if len(plan.seeds) == 1 else f"{label} seed {seed}")
            try:
                result = measure(variant, replace(plan.config, model=model, seed=seed), progress)
                results.append(with_roofline(result, roofs))
            except GnnperfError as exc:
                if is_unavailable(exc):  # cannot here, for a declared reason: n/a, not a failure
                    unavailable[label] = str(exc)
                    progress.write(f"n/a: {label}: {exc}", file=sys.stderr)
                else:
                    failures[label] = (str(exc) if len(plan.seeds) == 1
                                       else f"seed {seed}: {exc}")
                    progress.write(f"error: {exc}", file=sys.stderr)
            save(complete=False)
    progress.close()

    # A variant that failed with a later seed keeps no row of an earlier one.
    results[:] = [r for r in results if r.label not in failures]
    print(report.format_table(first_seed(), failures, reference=plan.reference,
                              unavailable=unavailable))
    # The reference of the first model sets the default target for every model.
    time_to_accuracy = report.time_to_accuracy(results, result_label(plan.reference,
                                                                     plan.models[0]),
                                               args.target_acc, args.target_share)
    if time_to_accuracy is not None:
        print()
        print(report.format_time_to_accuracy(time_to_accuracy))
    elif results and not args.no_time_to_accuracy:
        print(f"\ntime to accuracy: n/a: no target (the reference {plan.reference} did not run "
              f"here); give --target-acc or add {plan.reference} to --variants")
    save(complete=True)
    title = f"{dataset.name} on {env['device_name']}"
    if args.plot and results:
        report.plot(first_seed(), args.plot, title=title, roofs=roofs,
                    convergence=results, target=time_to_accuracy)
    if args.timeline and results:
        report.plot_timeline(first_seed(), args.timeline, title=f"memory over training: {title}")
    return 1 if failures else 0


def _drop_what_cannot_run_on(plan: RunPlan, device, rank0: bool) -> RunPlan:
    """:obj:`plan` without the pairs a technique cannot run on
    :obj:`device` in this environment (:meth:`Technique.unavailable_on`,
    e.g. ``compiled`` on a CPU without a C++ compiler): n/a with the reason,
    each said before the dataset loads."""
    from gnnperf.measure.runner import result_label
    pairs, cannot = [], dict(plan.cannot)
    for model, variant in plan.pairs:
        reason = next((why for why in (t.unavailable_on(device) for t in variant.techniques)
                       if why), None)
        if reason is None:
            pairs.append((model, variant))
            continue
        label = result_label(variant.name, model)
        cannot[label] = reason
        if rank0:
            print(f"n/a: {label}: {reason}", file=sys.stderr)
    return replace(plan, pairs=pairs, cannot=cannot)


def _join_world(args: argparse.Namespace) -> tuple[object, str, bool, bool]:
    """The device, the DDP backend, whether torchrun launched this process
    and whether it is rank 0 (under torchrun every rank runs the command;
    rank 0 alone prints and writes)."""
    from gnnperf import distributed
    from gnnperf.measure.runner import resolve_device

    torchrun = distributed.launched_by_torchrun()
    if torchrun and args.world_size is not None:
        raise GnnperfError("under torchrun the world is torchrun's: drop --world-size")
    device = resolve_device(args.device)
    backend = distributed.resolve_backend(args.backend, device)
    rank0 = True
    if torchrun:
        device = distributed.rank_device(device)
        shard = distributed.init_from_env(backend, device)
        rank0 = shard.rank == 0
        if not rank0:
            sys.stdout = sys.stderr = open(os.devnull, "w")
            args.no_progress, args.json, args.plot, args.timeline = True, None, None, None
    return device, backend, torchrun, rank0


class _PairMeasurer:
    """Measures one (model, variant) pair of a run: in this process, or a
    ddp variant with ``--world-size`` (1 too) in local ranks. Those measure every
    ddp variant of a model in one launch (a launch costs seconds); if that
    launch fails, each variant gets its own
    (:func:`gnnperf.distributed.measure_each_data_parallel`), so one failing
    variant leaves the others' results."""

    def __init__(self, args: argparse.Namespace, plan: RunPlan, dataset, device,
                 torchrun: bool, rank0: bool) -> None:
        self.args, self.pairs, self.dataset, self.device = args, plan.pairs, dataset, device
        self.torchrun, self.rank0 = torchrun, rank0
        self.launched: dict[tuple, dict] = {}  # (model, seed) -> its ddp variants' results

    def __call__(self, variant, config, progress):
        from gnnperf import distributed
        from gnnperf.measure.runner import measure_variant
        args = self.args
        # Local ranks, one as well: a launched rank of one is the path a
        # one-GPU machine can check (its own process, set_device, NCCL).
        if variant.data_parallel and args.world_size is not None:
            model = config.model
            if (model, config.seed) not in self.launched:  # the first ddp variant: all of them
                # Local ranks share this machine's threads; a ddp variant
                # named twice is launched once (dict keeps the order).
                group = list(dict.fromkeys(v for m, v in self.pairs
                                           if m == model and v.data_parallel))
                self.launched[model, config.seed] = distributed.measure_each_data_parallel(
                    group, args.world_size, self.dataset, config, str(self.device),
                    args.warmup, max(1, args.threads // args.world_size), args.backend,
                    track_accuracy=not args.no_time_to_accuracy)
            result = self.launched[model, config.seed][variant]
            progress.update(args.epochs)
            if isinstance(result, GnnperfError):
                raise result
            return result
        result = measure_variant(variant, self.dataset, config, self.device, args.warmup,
                                 on_epoch=lambda: progress.update(1),
                                 track_accuracy=not args.no_time_to_accuracy)
        if variant.data_parallel and self.torchrun:
            ranks = distributed.gather_to_rank0(result)
            return distributed.combine_ranks(ranks) if self.rank0 else result
        return result


def _run_metadata(args: argparse.Namespace, plan, dataset, device, tuned: bool, backend: str,
                  torchrun: bool) -> tuple[dict, object, dict]:
    """The environment (with the dataset's identity and the device's
    roofs), the roofs, and the run's configuration as the JSON records them."""
    from gnnperf.fingerprint import environment
    from gnnperf.measure.roofline import cached_roofs

    env = environment(plan.seeds[0], device, tuned)
    env["dataset"] = dataset.identity()
    # Measured once per device, thread count and torch, then cached.
    roofs = cached_roofs(device)
    env["roofs"] = roofs.to_dict()
    world = int(os.environ["WORLD_SIZE"]) if torchrun else (args.world_size or 1)
    # The models are listed apart ("models"); each result names its own.
    run_config = {**{k: v for k, v in asdict(plan.config).items() if k != "model"},
                  "dataset": dataset.name, "warmup_epochs": args.warmup,
                  "variants": plan.variants, "models": plan.models, "seeds": plan.seeds,
                  "target_acc": args.target_acc, "target_share": args.target_share,
                  "world_size": world,
                  "backend": backend, "launch": "torchrun" if torchrun else "local"}
    return env, roofs, run_config


def sampler_command(args: argparse.Namespace) -> int:
    import json

    from gnnperf import report
    from gnnperf.data import load_dataset
    from gnnperf.fingerprint import environment, tune_allocator
    from gnnperf.measure.runner import measure_sampler, resolve_device, set_threads
    from gnnperf.measure.roofline import cached_roofs

    check_output(args.json, "--json")
    if args.batch_size < 1:
        raise GnnperfError(f"batch size must be >= 1, got {args.batch_size}")
    device = resolve_device(args.device)
    set_threads(args.threads)
    tuned = args.tune_malloc and tune_allocator()
    dataset = load_dataset(args.dataset, args.root, seed=args.seed, download=args.download)
    roofs = cached_roofs(device)
    result = measure_sampler(dataset, list(args.fanout), args.batch_size, args.batches, device,
                             args.seed, roofs)
    print(report.format_sampler(result, dataset))
    if args.json:
        from gnnperf.schemas import SCHEMA_VERSION
        payload = {"schema_version": SCHEMA_VERSION,  # the format: gnnperf/schemas/sampler.json
                   "environment": {**environment(args.seed, device, tuned),
                                   "dataset": dataset.identity(),
                                   "roofs": roofs.to_dict()},
                   "result": result.to_dict()}
        write_atomic(args.json, json.dumps(payload, indent=2).encode())
    return 0


def roofs_command(args: argparse.Namespace) -> int:
    import json

    from gnnperf.measure.runner import resolve_device, set_threads
    from gnnperf.measure.roofline import cached_roofs, format_roofs

    check_output(args.json, "--json")
    device = resolve_device(args.device)
    set_threads(args.threads)
    roofs = cached_roofs(device, refresh=args.refresh)
    print(format_roofs(roofs))
    if args.json:
        write_atomic(args.json, json.dumps(roofs.to_dict(), indent=2).encode())
    return 0


def doctor_command(args: argparse.Namespace) -> int:
    import json

    from gnnperf.doctor import FAIL, Doctor, to_dict
    from gnnperf.measure.runner import resolve_device, set_threads

    check_output(args.json, "--json")
    device = resolve_device(args.device)
    set_threads(args.threads)
    checkout = Path(__file__).resolve().parent.parent
    start = time.perf_counter()

    done = []

    def show(check) -> None:
        note = f"  ({check.reason})" if check.reason else ""
        print(f"{check.status.upper():7} {check.name}: {check.figure}{note}", flush=True)
        done.append(check)
        if args.json:  # after every check: a check that hangs loses none before it
            write_atomic(args.json, json.dumps(
                {**to_dict(done, device), "complete": False}, indent=2).encode())

    from gnnperf.models import MODELS, parse_models, probe_model
    from gnnperf.variants import TrainConfig
    doctor = Doctor(device, root=checkout, run_asv=not args.skip_asv,
                    models=tuple(parse_models(args.model)))
    # A user's model that cannot run on the doctor's graph is refused in one
    # line before the first check, not as a failed check per variant.
    defaults = TrainConfig()
    for model in (m for m in doctor.models if m not in MODELS):
        probe_model(model, doctor.cora.graph, defaults.hidden, defaults.layers, device)
    checks = doctor.run(on_check=show)
    failed = [c for c in checks if c.status == FAIL]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed or skipped, "
          f"{len(failed)} failed, in {time.perf_counter() - start:.0f} s on {device}")
    if args.json:
        write_atomic(args.json, json.dumps(
            {**to_dict(checks, device), "complete": True}, indent=2).encode())
    return 1 if failed else 0


def _quiet_torch_logs() -> None:
    """The command's process, before torch is imported (c10 reads its log
    level once, at load): without it, every profiled step (the CPU memory
    peak) prints c10's "memory block of unknown size was allocated before
    the profiling started". A user's own setting wins; called in-process
    after torch is loaded, it changes nothing that torch reads."""
    if "torch" not in sys.modules:
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")


def main(argv: list[str] | None = None) -> int:
    _quiet_torch_logs()
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except GnnperfError as exc:
        verbose = getattr(args, "verbose", False)
        if verbose:
            traceback.print_exc()
        # An error that wraps the user's own (a model's forward) says where
        # it was raised; the whole traceback is a flag away.
        wraps = exc.__cause__ is not None
        hint = "; --verbose shows the traceback" if wraps and not verbose else ""
        print(f"gnnperf: error: {exc}{hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gnnperf: interrupted", file=sys.stderr)
        return 130
