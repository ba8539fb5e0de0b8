"""``gnnperf gate``, ``gnnperf bisect`` and ``gnnperf sensitivity``: their
options and what they print. Exit status: 0 passed, 1 a regression (or a
changed work metric; for bisect, an answer not confirmed), 2 a usage or
set-up error."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gnnperf.cli_help import command_parser
from gnnperf.measure.case import DEFAULT_DATASETS, Case
from gnnperf.errors import GnnperfError


def _log(quiet: bool):
    return (lambda msg: None) if quiet else (
        lambda msg: print(msg, file=sys.stderr, flush=True))


def _add_timing_options(parser: argparse.ArgumentParser, processes: int, rounds: int,
                        arm_pythons: bool = True) -> None:
    parser.add_argument("--processes", type=int, default=processes,
                        help=f"worker pairs, the t-test's replicates (default {processes})")
    parser.add_argument("--max-processes", type=int,
                        help="adaptive budget: an inconclusive verdict ('same' with its 95%% "
                             "interval past the threshold) gets one more pair at a time up "
                             "to this many (default 3 x --processes; = --processes: off)")
    parser.add_argument("--rounds", type=int, default=rounds,
                        help=f"interleaved rounds per pair (default {rounds})")
    parser.add_argument("--sample-ms", type=float, default=12.0,
                        help="target CPU time of one timed block of steps (default 12)")
    parser.add_argument("--threshold", type=float, default=0.03,
                        help="minimum effect: relative slowdown that may fail (default 0.03)")
    parser.add_argument("--alpha", type=float, default=0.01,
                        help="one-sided significance level (default 0.01)")
    parser.add_argument("--no-pin", action="store_true",
                        help="let the OS place the workers (default: both arms of a pair "
                             "share one CPU, so a slow CPU cancels in their ratio)")
    if not arm_pythons:
        parser.add_argument("--python", default=sys.executable,
                            help="interpreter every commit runs under (default: this one)")
        return
    parser.add_argument("--base-python", default=sys.executable,
                        help="interpreter of the base arm (another venv: other torch or "
                             "torch-geometric releases; default: this one)")
    parser.add_argument("--head-python", default=sys.executable,
                        help="interpreter of the head arm (default: this one)")


def add_parser(sub) -> None:
    """``gnnperf gate``, ``bisect`` and ``sensitivity`` (registered by :mod:`gnnperf.cli`)."""
    gate = command_parser(
        sub, "gate", gate_command, help="A/B regression gate: base vs head (exact work metrics and an "
                     "interleaved, statistically tested step time)",
        description="Compares a base (git ref, checkout or Python environment) with the head "
                    "tree: the exact work metrics of one training step must match, and the "
                    "step time must not regress (interleaved worker pairs, t-test across pairs).")
    where = gate.add_mutually_exclusive_group()
    where.add_argument("--base", help="git ref of the base (default HEAD; with only "
                                      "--base-python/--head-python, the head tree itself)")
    where.add_argument("--base-dir", help="a checkout to use as the base instead of a ref")
    gate.add_argument("--head-dir",
                      help="the tree under test (default: the git checkout you stand in, "
                           "its top level); a model repository's (not gnnperf's): its base "
                           "ref and working tree are the arms, gnnperf fixed")
    gate.add_argument("--library-subdir", default="",
                      help="in a model repository, the folder that holds its package "
                           "(e.g. src; default: the top)")
    gate.add_argument("--variants", help="comma-separated (default: the head tree's standard "
                                         "ones; in a model repository, the installed gnnperf's)")
    gate.add_argument("--datasets", default=",".join(DEFAULT_DATASETS),
                      help="comma-separated datasets every variant trains on (cases "
                           "variant@dataset; names as gnnperf run --dataset takes)")
    gate.add_argument("--models", default="gcn",
                      help="comma-separated models every variant trains (gcn, sage, gat, gin "
                           "or module:function; cases variant@dataset@model; default: gcn)")
    _add_timing_options(gate, processes=6, rounds=30)
    gate.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                      help="judge the worker's CPU time (default; immune to time the core "
                           "spent on other jobs) or wall-clock time")
    gate.add_argument("--no-time", action="store_true", help="exact work gate only")
    gate.add_argument("--no-work", action="store_true", help="time gate only")
    gate.add_argument("--accept-work-change", action="store_true",
                      help="report work-metric changes without failing on them")
    gate.add_argument("--explain", action="store_true",
                      help="profile each arm's step and say what moved (ops' self time, "
                           "common or particular shift, per-op overhead) even when the gate "
                           "passes; by default only a regression or a work change is "
                           "explained")
    gate.add_argument("--json", type=Path, help="write samples, verdicts and work metrics here")
    gate.add_argument("--markdown", type=Path,
                      help="write the reviewer's table here (e.g. $GITHUB_STEP_SUMMARY)")
    gate.add_argument("--quiet", action="store_true", help="no progress lines")

    bisect = command_parser(
        sub, "bisect", bisect_command, help="the first commit between GOOD and BAD where a benchmark changed",
        description="Binary search over the first-parent commits after GOOD up to BAD: by an "
                    "exact work metric, or by time with the gate's decision at each step and a "
                    "confirmation against the found commit's parent.")
    bisect.add_argument("good", help="a ref where the benchmark is as it should be")
    bisect.add_argument("bad", help="a later ref where it changed")
    bisect.add_argument("--case", default="baseline@cora",
                        help="variant@dataset[@model] (default: %(default)s)")
    bisect.add_argument("--metric", default="aten_ops",
                        help="time, or an exact work metric: aten_ops (default), flops, "
                             "profiled_ops, bytes_allocated, peak_bytes, compiled_graphs, "
                             "graph_breaks, recompiles")
    bisect.add_argument("--repo", default=".", help="the git repository (default: here)")
    bisect.add_argument("--library-repo",
                        help="bisect a library's commits instead (a clone of a pure-Python "
                             "library such as torch_geometric): GOOD and BAD are its refs, each "
                             "commit's source goes first on the path, gnnperf stays as it is "
                             "here")
    bisect.add_argument("--library-subdir", default="",
                        help="the folder of the library's clone that holds its package "
                             "(default: the top, where torch_geometric/ is)")
    _add_timing_options(bisect, processes=6, rounds=30, arm_pythons=False)
    bisect.add_argument("--quiet", action="store_true", help="no progress lines")

    study = command_parser(
        sub, "sensitivity", sensitivity_command, help="the time gate's false-alarm and detection rates, measured",
        description="Injects calibrated slowdowns into copies of this tree and runs the gate's "
                    "timing on them: per threshold, A/A false alarms and detections per size.")
    study.add_argument("--case", default="baseline@cora", help="variant@dataset[@model]")
    study.add_argument("--slowdowns",
                       help="injected slowdowns, comma-separated (0.05: +5%%; default "
                            "0.05,0.10,0.20)")
    study.add_argument("--aa-only", action="store_true",
                       help="only the A/A comparisons: the false alarms, no injected copy "
                            "(a trial is one gate run)")
    study.add_argument("--trials", type=int, default=10, help="gate runs per slowdown and A/A")
    study.add_argument("--processes", type=int, default=6,
                       help="worker pairs per gate run, the t-test's replicates")
    study.add_argument("--max-processes", type=int,
                       help="the adaptive gate's budget (default 3 x --processes); the study "
                            "reports the fixed and the adaptive gate from the same trials")
    study.add_argument("--rounds", type=int, default=30, help="interleaved rounds per pair")
    study.add_argument("--sample-ms", type=float, default=12.0,
                       help="target CPU time of one timed block of steps")
    study.add_argument("--thresholds", default="0.01,0.02,0.03,0.04,0.05",
                       help="minimum effects the trials are judged at afterwards, "
                            "comma-separated (the fixed gate's rows)")
    study.add_argument("--alpha", type=float, default=0.01,
                       help="one-sided significance level")
    study.add_argument("--threshold", type=float, default=0.03,
                       help="the threshold each trial's gate runs with (its adaptive extra "
                            "pairs follow it): the gate's own default")
    study.add_argument("--scratch", choices=("copy-input",),
                       help="a change every arm carries, e.g. copy-input: each step copies "
                            "the features (an allocation-bound step)")
    study.add_argument("--no-pin", action="store_true", help="let the OS place the workers")
    study.add_argument("--json", type=Path, help="write every trial here (after each trial)")
    study.add_argument("--from-json", type=Path, help="re-judge a previous --json file")


def _label(slowdown: float) -> str:
    return "A/A" if slowdown == 0 else f"+{slowdown * 100:g}%"


def _cases(text: str, check_variant: bool = True, check_model: bool = True) -> Case:
    """A ``variant@dataset[@model]`` case, its names checked: the dataset with
    data.py's grammar, the variant (unless the caller checks it in the tree
    it runs) with this checkout's registry, and whether it can train the
    model (unless the model comes with the arms: a library's, by import
    path, checked where it is importable)."""
    from gnnperf.data import check_dataset_name
    try:
        case = Case.parse(text)
    except ValueError as exc:
        raise GnnperfError(str(exc)) from None
    check_dataset_name(case.dataset)
    if not check_model:
        return case
    from gnnperf.models import get_model
    from gnnperf.variants import get_variant
    try:
        spec = get_variant(case.variant)
    except GnnperfError:
        if check_variant:
            raise
        return case  # another commit's registry may know it
    reason = spec.cannot_run_with(get_model(case.model))
    if reason:  # before any commit is built
        raise GnnperfError(f"{case.name}: {reason}")
    return case


def gate_command(args: argparse.Namespace) -> int:
    from gnnperf.models import parse_models
    from gnnperf.data import split_datasets
    from gnnperf.gate.arms import first_on_path
    from gnnperf.gate.compare import GateOptions, default_head_dir, head_library, run_gate
    from gnnperf.io import check_output, write_atomic

    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    head_dir = (str(Path(args.head_dir).resolve()) if args.head_dir else default_head_dir(
        args.base, args.base_dir, args.base_python, args.head_python))
    # In a model repository its model by import path is the head's: read as the head arm reads it.
    with first_on_path(head_library(head_dir, args.library_subdir)):
        models = tuple(parse_models(args.models))
    options = GateOptions(
        base=args.base, base_dir=args.base_dir, head_dir=head_dir,
        library_subdir=args.library_subdir,
        base_python=args.base_python, head_python=args.head_python,
        variants=[v.strip() for v in args.variants.split(",") if v.strip()]
        if args.variants else None,
        datasets=split_datasets(args.datasets),
        models=models,
        processes=args.processes, max_processes=args.max_processes, rounds=args.rounds,
        sample_ms=args.sample_ms,
        clock=args.clock, threshold=args.threshold, alpha=args.alpha,
        time_gate=not args.no_time, work_gate=not args.no_work,
        accept_work_change=args.accept_work_change, pin_cpus=not args.no_pin,
        explain="always" if args.explain else "changes")
    result = run_gate(options, _log(args.quiet))
    print(result.text)
    if args.json:
        from gnnperf.schemas import SCHEMA_VERSION
        # The format: gnnperf/schemas/gate.json.
        document = {"schema_version": SCHEMA_VERSION, **result.report}
        write_atomic(args.json, json.dumps(document, indent=1).encode())
    if args.markdown:
        with open(args.markdown, "a") as out:  # appends: GITHUB_STEP_SUMMARY may hold more
            out.write(result.markdown)
    return 1 if result.failed else 0


def bisect_command(args: argparse.Namespace) -> int:
    from gnnperf.gate.bisection import bisect
    from gnnperf.gate.compare import GateOptions

    options = GateOptions(head_dir=str(Path(args.repo).resolve()), base_python=args.python,
                          head_python=args.python, processes=args.processes,
                          max_processes=args.max_processes, rounds=args.rounds,
                          sample_ms=args.sample_ms, threshold=args.threshold, alpha=args.alpha,
                          pin_cpus=not args.no_pin)
    options.validate(trees=not args.library_repo)
    start = time.perf_counter()
    # The variant is checked in the BAD commit's registry (bisect's own check).
    if args.library_subdir and not args.library_repo:
        raise GnnperfError("--library-subdir applies to --library-repo; give the library's clone")
    case = _cases(args.case, check_variant=False, check_model=not args.library_repo)
    result = bisect(args.good, args.bad, case, args.metric,
                    args.repo, options, _log(args.quiet), library_repo=args.library_repo,
                    library_subdir=args.library_subdir)
    print(result.describe() + f" in {time.perf_counter() - start:.0f} s")
    # An answer the check against its parent did not confirm is no pass.
    return 0 if result.confirmed else 1


def sensitivity_command(args: argparse.Namespace) -> int:
    from gnnperf.gate.sensitivity import StudySettings, evaluate, format_table, rejudge, run_study
    from gnnperf.io import write_atomic

    try:
        thresholds = [float(x) for x in args.thresholds.split(",")]
        slowdowns = () if args.aa_only else tuple(
            float(x) for x in (args.slowdowns or "0.05,0.10,0.20").split(","))
    except ValueError:
        raise GnnperfError("--thresholds and --slowdowns take comma-separated numbers") from None
    if args.from_json:
        if not args.from_json.is_file():
            raise GnnperfError(f"--from-json {args.from_json}: no such file")
        try:
            study = rejudge(json.loads(args.from_json.read_text()))
        except (ValueError, KeyError, TypeError) as exc:
            raise GnnperfError(f"--from-json {args.from_json}: not a study written by "
                               f"gnnperf sensitivity --json ({type(exc).__name__}: {exc})") from None
    else:
        if args.processes < 3 or args.rounds < 3 or args.trials < 1 or args.sample_ms <= 0:
            raise GnnperfError("need --processes >= 3, --rounds >= 3, --trials >= 1 and "
                               "--sample-ms > 0")
        if not 0 < args.threshold < 1 or not 0 < args.alpha < 1:
            raise GnnperfError("need 0 < --threshold < 1 and 0 < --alpha < 1")
        if args.aa_only and args.slowdowns is not None:
            raise GnnperfError("--aa-only takes no --slowdowns: it times the A/A comparisons "
                               "only; drop one of them")
        if not args.aa_only and (not slowdowns or min(slowdowns) <= 0):
            raise GnnperfError("--slowdowns must be > 0, e.g. 0.05,0.10 for +5% and +10%")
        settings = StudySettings(_cases(args.case), slowdowns, args.trials, args.processes,
                                 args.rounds, args.sample_ms, args.alpha, args.threshold,
                                 pin_cpus=not args.no_pin, max_processes=args.max_processes,
                                 scratch=args.scratch)
        if settings.budget < settings.processes:
            raise GnnperfError(f"--max-processes {args.max_processes} is below --processes "
                               f"{args.processes}; give at least as many (equal: no adaptivity)")

        def progress(study: dict, latest: list[dict]) -> None:
            done = latest[0]["trial"] + 1
            print(f"trial {done}/{settings.trials} [{sum(r['seconds'] for r in latest):.0f} s] "
                  + "  ".join(
                      f"{_label(r['slowdown'])}: {r['cpu']['ratio']:.3f} (p {r['cpu']['p_slower']:.3f}"
                      f"; adaptive {r['adaptive']['ratio']:.3f}, p {r['adaptive']['p_slower']:.3f}"
                      f", {r['adaptive']['pairs']} pairs)" for r in latest), flush=True)
            if args.json:
                write_atomic(args.json, json.dumps(study).encode())

        from gnnperf.gate.arms import checkout_top
        study = run_study(settings, checkout_top(), progress)
        if args.json:
            write_atomic(args.json, json.dumps(study).encode())
    print(json.dumps(study["settings"]))
    from gnnperf.gate.stats import adaptive_budget
    given = study["settings"]
    adaptive = (given["processes"], adaptive_budget(given["processes"], given.get("max_processes")),
                given.get("threshold", thresholds[0]))
    print(format_table(study["trials"], evaluate(study["trials"], thresholds, args.alpha,
                                                 adaptive=adaptive)))
    return 0

