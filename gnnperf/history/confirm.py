"""The gate at an alert's commit (``gnnperf history --confirm``): the
commit against its parent, or, where the change spans several commits,
across the span and then ``gnnperf bisect`` for the commit; the gate's
reading of each case, the commands that reproduce it, and the one-line
check that the results are the repository's commits. The gate loads on
first use.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gnnperf.errors import GnnperfError
from gnnperf.history.alerts import Alert, Confirmation, GateCase
from gnnperf.history.asv_results import Results, Series

@dataclass
class ConfirmOptions:
    r"""How ``--confirm`` runs the gate (``gnnperf gate``'s options of the
    same names).

    Args:
        repo: the git repository whose commits the results are of.
        processes: worker pairs, the t-test's replicates.
        max_processes: the adaptive budget (``None``: the gate's default).
        rounds: interleaved rounds per pair.
        threshold: the smallest slowdown that fails (the history's).
        python: the interpreter both arms run under.
    """
    repo: Path
    processes: int = 6
    max_processes: int | None = None
    rounds: int = 30
    threshold: float = 0.03
    python: str = sys.executable


def _case_of(series: Series):
    """The gate's :class:`~gnnperf.measure.case.Case` of a series (its
    ``dataset``, ``variant`` and ``model`` parameters), or ``None``."""
    import ast
    from gnnperf.measure.case import Case

    def plain(name: str) -> str | None:
        text = series.params.get(name)
        if text is None:
            return None
        try:
            value = ast.literal_eval(text)  # asv stores each parameter's repr
        except (ValueError, SyntaxError):
            value = text
        return str(value)

    variant, dataset = plain("variant"), plain("dataset")
    if variant is None or dataset is None:
        return None
    return Case.of(variant, dataset, plain("model") or "gcn")


def _work_metric(alert: Alert) -> str | None:
    """The exact metric (``aten_ops``, ...) of the first work metric that
    moved inside :obj:`alert`, for a bisect by it (deterministic)."""
    from gnnperf.measure.workcount import EXACT_FIELDS
    for name, *_ in alert.work:
        metric = name.split("(")[0].rsplit(".", 1)[-1].removeprefix("track_")
        if metric in EXACT_FIELDS:
            return metric
    return None


def _read_gate(report: dict, case_names: list[str]) -> list[GateCase]:
    """Each case's time verdict, changed work metrics and ATen ops from a
    gate report (:attr:`~gnnperf.gate.compare.GateResult.report`)."""
    verdicts = {v["case"]: v for v in report.get("time", {}).get("verdicts", [])}
    rows = report.get("work", {}).get("rows", [])
    out = []
    for name in case_names:
        v = verdicts.get(name)
        states = {key: report.get(key) or {} for key in ("head_failed", "base_failed",
                                                         "unavailable")}
        if v is not None:
            reading = GateCase(name, v["verdict"], v["ratio"], v["ci_low"], v["ci_high"],
                               v["p_slower"], v.get("pairs", 0))
        elif name in states["head_failed"]:
            reading = GateCase(name, f"failed in the head: {states['head_failed'][name]}")
        elif name in states["base_failed"]:
            reading = GateCase(name, f"failed in the base: {states['base_failed'][name]}")
        elif name in states["unavailable"]:
            reading = GateCase(name, f"n/a: {states['unavailable'][name]}")
        else:
            reading = GateCase(name, "not timed")
        for row in rows:
            if row["case"] != name:
                continue
            if "op_diff" in row:
                reading.ops = [(op, a, b) for op, (a, b) in row["op_diff"].items()]
            elif not row["same"] and not row.get("new"):
                reading.work.append((row["metric"], row["base"], row["head"]))
        out.append(reading)
    return out


def _seen_by(readings: list[GateCase]) -> str:
    """Which of the gate's two halves saw the change."""
    seen = (["the time gate: REGRESSION"] if any(r.verdict == "REGRESSION" for r in readings)
            else []) + (["the work gate: the step's work changed"]
                        if any(r.work or r.ops for r in readings) else [])
    return "; ".join(seen)


def _gate_command(repo: Path, base: str, head: str, cases, options: ConfirmOptions) -> str:
    """The shell commands that rerun the gate of :obj:`head` against
    :obj:`base` on :obj:`cases`: the head checked out as a git worktree (the
    gate's ``--base`` is a ref of the head's repository)."""
    import shlex
    tree = f"/tmp/gnnperf-{head[:10]}"
    variants = ",".join(dict.fromkeys(c.variant for c in cases))
    datasets = ",".join(dict.fromkeys(c.dataset for c in cases))
    models = ",".join(dict.fromkeys(c.model for c in cases))
    return (f"git -C {shlex.quote(str(repo))} worktree add --detach {tree} {head} && "
            f"gnnperf gate --base {base} --head-dir {tree} --variants {shlex.quote(variants)} "
            f"--datasets {shlex.quote(datasets)}"
            + (f" --models {shlex.quote(models)}" if models != "gcn" else "")
            + _timing_flags(options))


def _timing_flags(options: ConfirmOptions) -> str:
    return (f" --processes {options.processes}"
            + (f" --max-processes {options.max_processes}" if options.max_processes else "")
            + f" --rounds {options.rounds} --threshold {options.threshold:g}")


def confirm_alert(alert: Alert, results: Results, options: ConfirmOptions,
                  log: Callable[[str], None] = lambda msg: None) -> Confirmation:
    """Runs the gate (:func:`~gnnperf.gate.compare.run_gate`, work and time)
    on :obj:`alert`'s cases between the commit before the change and the
    change's last commit. A change at one commit is gated against its
    parent. A change spanning several commits (asv skipped some, or a
    drift) is gated across the span, and where the gate confirms it,
    :func:`~gnnperf.gate.bisection.bisect` finds the first commit (by the
    exact work metric that moved there, else by time), which is gated
    against its own parent; a drift no commit carries alone stays confirmed
    across its span. A gate that cannot run is an ``error``: the alert
    stands as the history found it.

    Args:
        alert: the alert to confirm.
        results: the results it was found in.
        options: how the gate runs.
        log: where the gate's progress goes, line by line.

    Returns:
        The gate's word on the alert.
    """
    import tempfile
    from gnnperf.gate import arms as arm_runner
    from gnnperf.gate.bisection import bisect, commits_between
    from gnnperf.gate.compare import GateOptions, run_gate

    rising = [m for m in alert.moved if m.regression and m.conclusive] or alert.moved
    cases = list(dict.fromkeys(c for c in map(_case_of, (m.series for m in rising)) if c))
    if not cases:
        return Confirmation("error", note=f"{rising[0].series.name} names no variant and "
                                          f"dataset to gate")
    first = rising[0]
    before = first.series.commits[first.change.start - 1]
    last = first.series.commits[first.change.end]
    repo = options.repo

    def gate(base: str, head: str, tmp: str) -> tuple[list[GateCase], str]:
        log(f"gate: {head[:10]} against {base[:10]} on {', '.join(c.name for c in cases)} ...")
        tree = arm_runner.export_ref(head, Path(tmp) / head[:12], repo)
        result = run_gate(GateOptions(
            base=base, repo=str(repo), head_dir=str(tree), cases=list(cases),
            base_python=options.python, head_python=options.python,
            processes=options.processes, max_processes=options.max_processes,
            rounds=options.rounds, threshold=options.threshold), log)
        return _read_gate(result.report, [c.name for c in cases]), \
            _gate_command(repo, base, head, cases, options)

    def subject(commit: str) -> str:
        import subprocess
        return subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%s", commit],
                              capture_output=True, text=True).stdout.strip()

    try:
        chain = commits_between(repo, before, last)  # chain[0] is `before`
        with tempfile.TemporaryDirectory(prefix="gnnperf-history-") as tmp:
            readings, command = gate(before, last, tmp)
            single = len(chain) == 2
            found = Confirmation(
                "confirmed" if any(r.confirms for r in readings) else "unconfirmed",
                culprit=last if single else None, base=before, head=last,
                subject=subject(last), cases=readings, command=command)
            if single or not found.confirmed:
                against = "its parent" if single else "the commit before the change"
                found.note = (f"the gate of {last[:10]} against {against} {before[:10]} "
                              + (f"confirms it ({_seen_by(readings)})" if found.confirmed
                                 else "does not see it"))
                return found
            # Confirmed across the span: which commit of it.
            # An exact metric that moved makes the search deterministic.
            metric = next((m for m, _, _ in readings[0].work), None) or _work_metric(alert) \
                or "time"
            found.search = (f"gnnperf bisect {before} {last} --repo {repo} --case "
                            f"{cases[0].name} --metric {metric}" + _timing_flags(options))
            log(f"bisect {before[:10]}..{last[:10]} by {metric} ...")
            span = (f"the gate across the {len(chain) - 1} commits after {before[:10]} "
                    f"confirms it ({_seen_by(readings)})")
            try:
                searched = bisect(before, last, cases[0], metric, str(repo), GateOptions(
                    head_dir=str(repo), base_python=options.python,
                    head_python=options.python, processes=options.processes,
                    max_processes=options.max_processes, rounds=options.rounds,
                    threshold=options.threshold), log)
            except GnnperfError as exc:  # confirmed all the same: the span is the answer
                found.note = f"{span}; bisect by {metric} named no commit ({exc})"
                return found
            if not searched.confirmed:
                found.note = (f"{span}; bisect by {metric} found no one commit that carries "
                              f"it alone (a drift)")
                return found
            parent = chain[chain.index(searched.commit) - 1]
            readings, command = gate(parent, searched.commit, tmp)
            if not any(r.confirms for r in readings):
                found.note = (f"{span}; bisect by {metric} found {searched.commit[:10]}, "
                              f"which the gate against its parent does not see alone (a "
                              f"drift)")
                return found
            return Confirmation("confirmed", culprit=searched.commit, base=parent,
                                head=searched.commit, subject=searched.subject,
                                cases=readings, command=command, search=found.search,
                                note=f"bisect by {metric} over {before[:10]}..{last[:10]} "
                                     f"found it; the gate against its parent confirms it "
                                     f"({_seen_by(readings)})")
    except GnnperfError as exc:
        return Confirmation("error", base=before, head=last, note=f"the gate could not "
                                                                  f"check it: {exc}")


def check_repository(results: Results, repo: Path) -> None:
    """``--confirm``'s one-line error where :obj:`repo` is not the git
    repository whose commits the results are of.

    Args:
        results: the results read in :obj:`repo`'s git order, where it has
            their commits.
        repo: the repository ``--confirm`` gates commits of.

    Raises:
        GnnperfError: a commit of the results is not in :obj:`repo`.
    """
    if results.order != "git":
        import subprocess
        missing = next((c for c in results.commits if subprocess.run(
            ["git", "-C", str(repo), "cat-file", "-e", f"{c}^{{commit}}"],
            capture_output=True).returncode != 0), results.commits[0])
        raise GnnperfError(f"--confirm: commit {missing[:12]} of the results is not in --repo "
                           f"{repo}; point --repo at the git repository asv ran on")


__all__ = ["ConfirmOptions", "check_repository", "confirm_alert"]
