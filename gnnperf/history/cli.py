"""``gnnperf history``: its options (:func:`add_parser`, registered by
:mod:`gnnperf.cli`) and what it runs (:func:`history_command`): read asv's
results, find the changes, confirm them with the gate where asked, report.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gnnperf.cli_help import command_parser
from gnnperf.errors import GnnperfError
from gnnperf.history.alerts import DEFAULT_BENCH, DEFAULT_METHOD, analyse, find_gaps, select
from gnnperf.history.asv_results import read_asv_results
from gnnperf.history.confirm import ConfirmOptions, check_repository, confirm_alert
from gnnperf.history.detect import DETECTORS, MERGE_WITHIN, MIN_POINTS
from gnnperf.history.render import format_markdown, format_text, to_dict


def add_parser(sub) -> None:
    """Registers ``gnnperf history`` (its options and :func:`history_command`).

    Args:
        sub: the top-level parser's subparsers (:mod:`gnnperf.cli`).
    """
    parser = command_parser(
        sub, "history", history_command,
        help="change points across asv's results: steps and slow drifts, commit by commit",
        description="Reads asv's results folder (one machine), orders the commits as asv "
                    "publish does (git rev-list --all --date-order; by date where the "
                    "commits are not in --repo) and finds the changes in each series (a "
                    "benchmark at one parameter combination) with a change-point detector; "
                    "a drift over a few commits is one change. Each change names its first "
                    "commit, its size with a 95% interval, the series that moved with it "
                    "and the exact work metrics (track_aten_ops, ...) that changed there. "
                    "A rise whose interval reaches no change is inconclusive and never "
                    "fails; with --confirm, the gate at the commit decides each rise that "
                    "would fail.")
    parser.add_argument("--results", type=Path, default=Path(".asv/results"),
                        help="asv's results_dir (default: %(default)s)")
    parser.add_argument("--machine", help="asv's machine name (default: the folder's only one)")
    parser.add_argument("-b", "--bench", default=DEFAULT_BENCH,
                        help="regular expression searched in each series' name, "
                             "benchmark(params) (default: %(default)s, the step over the "
                             "suite's reference step; '\\.time_' for the raw step times)")
    parser.add_argument("--method", default=DEFAULT_METHOD, choices=sorted(DETECTORS),
                        help="change-point detector (default: %(default)s; "
                             "docs/results.md compares them)")
    parser.add_argument("--threshold", type=float, default=0.03,
                        help="a rise past this fraction, its 95%% interval leaving out no "
                             "change, is a regression that fails (default: %(default)s, the "
                             "gate's)")
    parser.add_argument("--recent", type=int,
                        help="only regressions starting in the last N commits fail "
                             "(all are reported)")
    parser.add_argument("--repo", type=Path, default=Path("."),
                        help="the git repository whose commits the results are of: their "
                             "order, and --confirm's trees (default: here)")
    parser.add_argument("--merge-within", type=int, default=MERGE_WITHIN,
                        help="same-direction changes fewer commits apart than this are one "
                             "drift (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="write the changes here")
    parser.add_argument("--markdown", type=Path,
                        help="write the reviewer's Markdown here (e.g. $GITHUB_STEP_SUMMARY): "
                             "with --confirm, an issue-ready section per confirmed regression "
                             "(culprit, the gate's ratio and interval, ATen ops, the command), "
                             "then the table")
    confirm = parser.add_argument_group(
        "confirmation", "--confirm runs gnnperf gate on each regression that would fail: the "
                        "commit against its parent (gnnperf bisect first where the change "
                        "spans several commits); one the gate does not see is 'unconfirmed' "
                        "and does not fail")
    confirm.add_argument("--confirm", action="store_true",
                         help="confirm each failing regression with the gate before it fails")
    confirm.add_argument("--processes", type=int, default=6,
                         help="the gate's worker pairs (default: %(default)s)")
    confirm.add_argument("--max-processes", type=int,
                         help="the gate's adaptive budget (default: 3 x --processes)")
    confirm.add_argument("--rounds", type=int, default=30,
                         help="the gate's interleaved rounds per pair (default: %(default)s)")


def history_command(args: argparse.Namespace) -> int:
    """``gnnperf history``: reads the results, finds the changes, confirms
    them with the gate (``--confirm``), prints the report and writes the
    ``--json`` and ``--markdown`` ones.

    Args:
        args: the parsed options (:func:`add_parser`).

    Returns:
        0 no regression, 1 a regression past the threshold (with
        ``--confirm``, one the gate confirmed or could not check) or a series
        that fails at its newest commits.

    Raises:
        GnnperfError: bad input (exit 2, one line).
    """
    import json
    from gnnperf.io import check_output, write_atomic
    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    if args.threshold < 0:
        raise GnnperfError(f"--threshold must be >= 0, got {args.threshold}")
    if args.recent is not None and args.recent < 1:
        raise GnnperfError(f"--recent must be >= 1, got {args.recent}")
    if args.confirm and (args.processes < 3 or args.rounds < 3):
        raise GnnperfError("--confirm needs --processes >= 3 (the t-test's replicates) and "
                           "--rounds >= 3")
    results = read_asv_results(args.results, args.machine, args.repo)
    if args.confirm:
        check_repository(results, args.repo)
    alerts, short, matched = analyse(results, args.bench, method=args.method,
                                     threshold=args.threshold, merge_within=args.merge_within)
    gaps = find_gaps(results, select(results, args.bench))
    if short and len(short) == matched and not gaps:  # nothing judged: never "no change"
        s, why = max(short, key=lambda x: len(x[0].values))
        if len(s.values) >= MIN_POINTS:  # long enough, but not a figure a ratio applies to
            raise GnnperfError(f"no series matching '{args.bench}' can be judged: {s.name}: "
                               f"{why}")
        raise GnnperfError(
            f"history too short: {len(short)} series matching '{args.bench}', the longest "
            f"{len(s.values)} commits ({s.name}); the {args.method} detector needs at least "
            f"{MIN_POINTS}: run asv on more commits (e.g. asv run HEAD~{MIN_POINTS}..HEAD)")
    first = len(results.commits) - args.recent if args.recent else 0
    # A rise whose own interval reaches no change may be noise: never a failure.
    failing = [a for a in alerts if a.conclusive and a.position >= first]
    header = (f"machine {results.machine}: {len(results.commits)} commits ({results.order} order), "
              f"series matching '{args.bench}', detector {args.method}: "
              f"{DETECTORS[args.method][1]}"
              + (f"; {results.dropped} points of older benchmark versions left out"
                 if results.dropped else ""))
    if args.confirm:
        options = ConfirmOptions(args.repo.resolve(), args.processes, args.max_processes,
                                 args.rounds, args.threshold)

        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)
        if not failing:
            log("--confirm: nothing to confirm (no regression that would fail)")
        for a in failing:
            a.confirmation = confirm_alert(a, results, options, log)
        # The gate's "no" clears an alert; its "could not run" does not.
        failing = [a for a in failing if a.confirmation.state != "unconfirmed"]
    print(format_text(results, alerts, short, header, failing, args.threshold, gaps))
    if args.markdown:
        write_atomic(args.markdown, format_markdown(results, alerts, short, header, failing,
                                                    args.threshold, gaps).encode())
    if args.json:
        settings = {"bench": args.bench, "method": args.method, "threshold": args.threshold,
                    "recent": args.recent, "merge_within": args.merge_within,
                    "confirm": args.confirm}
        write_atomic(args.json, json.dumps(to_dict(results, alerts, short, failing, settings,
                                                   gaps), indent=2).encode())
    return 1 if failing or any(g.current for g in gaps) else 0


__all__ = ["add_parser", "history_command"]
