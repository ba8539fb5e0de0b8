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
from gnnperf.errors import GnnperfError
from gnnperf.gate.compare import GateOptions
from gnnperf.measure.case import DEFAULT_DATASETS, Case
from gnnperf.measure.workcount import EXACT_FIELDS


def _log(quiet: bool):
    return (lambda msg: None) if quiet else (
        lambda msg: print(msg, file=sys.stderr, flush=True))


def _add_timing_options(parser: argparse.ArgumentParser, interpreters: str | None = "arms"
                        ) -> None:
    """The time gate's options, declared once for ``gate``, ``bisect`` and
    ``sensitivity``: their defaults are :class:`~gnnperf.gate.compare.GateOptions`',
    so a command line and a gate built in code time alike. :obj:`interpreters`:
    ``arms`` (``--base-python``/``--head-python``), ``one`` (``--python``, every
    commit) or ``None`` (the study runs this interpreter)."""
    parser.add_argument("--processes", type=int, default=GateOptions.processes,
                        help=f"worker pairs per gate run, the t-test's replicates (default "
                             f"{GateOptions.processes})")
    parser.add_argument("--max-processes", type=int, default=GateOptions.max_processes,
                        help="adaptive budget: an inconclusive verdict ('same' with its 95%% "
                             "interval past the threshold) gets one more pair at a time up "
                             "to this many (default 3 x --processes; = --processes: off)")
    parser.add_argument("--rounds", type=int, default=GateOptions.rounds,
                        help=f"interleaved rounds per pair (default {GateOptions.rounds})")
    parser.add_argument("--sample-ms", type=float, default=GateOptions.sample_ms,
                        help=f"target CPU time of one timed block of steps (default "
                             f"{GateOptions.sample_ms:g})")
    parser.add_argument("--threshold", type=float, default=GateOptions.threshold,
                        help=f"minimum effect: relative slowdown that may fail (default "
                             f"{GateOptions.threshold:g})")
    parser.add_argument("--alpha", type=float, default=GateOptions.alpha,
                        help=f"one-sided significance level (default {GateOptions.alpha:g})")
    parser.add_argument("--no-pin", action="store_true", default=not GateOptions.pin_cpus,
                        help="let the OS place the workers (default: both arms of a pair "
                             "share one CPU, so a slow CPU cancels in their ratio)")
    if interpreters == "one":
        parser.add_argument("--python", default=sys.executable,
                            help="interpreter every commit runs under (default: this one)")
    elif interpreters == "arms":
        parser.add_argument("--base-python", default=sys.executable,
                            help="interpreter of the base arm (another venv: other torch or "
                                 "torch-geometric releases; default: this one)")
        parser.add_argument("--head-python", default=sys.executable,
                            help="interpreter of the head arm (default: this one)")


def _gate_options(args: argparse.Namespace, **fields) -> GateOptions:
    """The gate's options from :func:`_add_timing_options`' parsed values and
    the command's own :obj:`fields`: the one place a command line becomes a
    :class:`~gnnperf.gate.compare.GateOptions`."""
    return GateOptions(processes=args.processes, max_processes=args.max_processes,
                       rounds=args.rounds, sample_ms=args.sample_ms, threshold=args.threshold,
                       alpha=args.alpha, pin_cpus=not args.no_pin, **fields)


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
    _add_timing_options(gate)
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
                        help="time, or an exact work metric: "
                             + ", ".join(f"{name} (default)" if name == "aten_ops" else name
                                         for name in EXACT_FIELDS))
    bisect.add_argument("--repo", default=".", help="the git repository (default: here)")
    bisect.add_argument("--library-repo",
                        help="bisect a library's commits instead (a clone of a pure-Python "
                             "library such as torch_geometric): GOOD and BAD are its refs, each "
                             "commit's source goes first on the path, gnnperf stays as it is "
                             "here")
    bisect.add_argument("--library-subdir", default="",
                        help="the folder of the library's clone that holds its package "
                             "(default: the top, where torch_geometric/ is)")
    _add_timing_options(bisect, interpreters="one")
    bisect.add_argument("--quiet", action="store_true", help="no progress lines")

    study = command_parser(
        sub, "sensitivity", sensitivity_command, help="the time gate's false-alarm and detection rates, measured",
        description="Injects calibrated slowdowns into copies of this tree and runs the gate's "
                    "timing on them: per threshold, A/A false alarms and detections per size. "
                    "Each trial's comparisons are gate runs with the timing options below "
                    "(--threshold: the one their adaptive extra pairs follow); the fixed gate "
                    "(the first --processes pairs) and the adaptive one are reported from the "
                    "same trials.")
    study.add_argument("--case", default="baseline@cora", help="variant@dataset[@model]")
    study.add_argument("--slowdowns",
                       help="injected slowdowns, comma-separated (0.05: +5%%; default "
                            "0.05,0.10,0.20)")
    study.add_argument("--aa-only", action="store_true",
                       help="only the A/A comparisons: the false alarms, no injected copy "
                            "(a trial is one gate run)")
    study.add_argument("--trials", type=int, default=10, help="gate runs per slowdown and A/A")
    _add_timing_options(study, interpreters=None)
    study.add_argument("--thresholds", default="0.01,0.02,0.03,0.04,0.05",
                       help="minimum effects the trials are judged at afterwards, "
                            "comma-separated (the fixed gate's rows)")
    study.add_argument("--scratch", choices=("copy-input",),
                       help="a change every arm carries, e.g. copy-input: each step copies "
                            "the features (an allocation-bound step)")
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
    from gnnperf.gate.compare import default_head_dir, head_library, run_gate
    from gnnperf.io import check_output, write_atomic

    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    head_dir = (str(Path(args.head_dir).resolve()) if args.head_dir else default_head_dir(
        args.base, args.base_dir, args.base_python, args.head_python))
    # In a model repository its model by import path is the head's: read as the head arm reads it.
    with first_on_path(head_library(head_dir, args.library_subdir)):
        models = tuple(parse_models(args.models))
    options = _gate_options(
        args, base=args.base, base_dir=args.base_dir, head_dir=head_dir,
        library_subdir=args.library_subdir,
        base_python=args.base_python, head_python=args.head_python,
        variants=[v.strip() for v in args.variants.split(",") if v.strip()]
        if args.variants else None,
        datasets=split_datasets(args.datasets),
        models=models, clock=args.clock,
        time_gate=not args.no_time, work_gate=not args.no_work,
        accept_work_change=args.accept_work_change,
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

    options = _gate_options(args, head_dir=str(Path(args.repo).resolve()),
                            base_python=args.python, head_python=args.python)
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
        # Each trial's comparisons are gate runs: the gate's checks, and the study's own.
        options = _gate_options(args, work_gate=False)
        options.validate(trees=False)
        if args.trials < 1 or args.threshold == 0:
            raise GnnperfError("need --trials >= 1 and --threshold > 0")
        if args.aa_only and args.slowdowns is not None:
            raise GnnperfError("--aa-only takes no --slowdowns: it times the A/A comparisons "
                               "only; drop one of them")
        if not args.aa_only and (not slowdowns or min(slowdowns) <= 0):
            raise GnnperfError("--slowdowns must be > 0, e.g. 0.05,0.10 for +5% and +10%")
        settings = StudySettings(_cases(args.case), slowdowns, args.trials, options,
                                 scratch=args.scratch)

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
    from gnnperf.gate.decision import adaptive_budget
    given = study["settings"]
    adaptive = (given["processes"], adaptive_budget(given["processes"], given.get("max_processes")),
                given.get("threshold", thresholds[0]))
    print(format_table(study["trials"], evaluate(study["trials"], thresholds, args.alpha,
                                                 adaptive=adaptive)))
    return 0

