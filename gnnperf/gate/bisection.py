"""``gnnperf bisect GOOD BAD``: the first commit between two refs where a
benchmark changed.

By a work metric (``aten_ops``, ``flops``, ``peak_bytes``, ...: exact, so a
plain binary search on "differs from GOOD"), or by ``time``: at each probe
the time gate judges the probe against GOOD, and the commit found is
confirmed by a final gate run against its parent. Either way the search
takes at most ``ceil(log2(n)) + 2`` measurements for ``n`` commits after
GOOD (GOOD and BAD first, then the halvings; for time, BAD against GOOD,
the halvings and the confirmation).
"""
from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from gnnperf.measure.case import Case
from gnnperf.errors import GnnperfError
from gnnperf.gate import arms as arm_runner
from gnnperf.gate.arms import Arm, ArmProbe
from gnnperf.gate.compare import GateOptions, compare_arms
from gnnperf.measure.workcount import EXACT_FIELDS

METRICS = ("time",) + EXACT_FIELDS


@dataclass
class BisectResult:
    """The first changed commit, its subject, the metric before (its
    parent) and after, whether the final check confirmed it, and every
    measurement made (``(commit, value)``; for time the gate's ratio to GOOD)."""
    commit: str
    subject: str
    metric: str
    before: float | int | None
    after: float | int | None
    confirmed: bool
    measurements: list[tuple[str, object]] = field(default_factory=list)

    def describe(self) -> str:
        unit = " ms" if self.metric == "time" else ""
        def fmt(value):
            if value is None:
                return "-"
            return f"{value * 1e3:.3f}" if self.metric == "time" else f"{value:,}"
        state = "" if self.confirmed else " (NOT confirmed: the change may be spread over commits)"
        return (f"first changed commit: {self.commit[:12]} {self.subject}\n"
                f"{self.metric}: {fmt(self.before)}{unit} -> {fmt(self.after)}{unit}{state}\n"
                f"{len(self.measurements)} measurements")


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GnnperfError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """The first-parent commits after :obj:`good` up to :obj:`bad`, oldest first."""
    good_sha, bad_sha = (_git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}")
                         for ref in (good, bad))
    if _git(repo, "merge-base", good_sha, bad_sha) != good_sha:
        raise GnnperfError(f"{good} is not an ancestor of {bad}; give GOOD first, then BAD")
    commits = _git(repo, "rev-list", "--first-parent", "--reverse",
                   f"{good_sha}..{bad_sha}").split()
    if not commits:
        raise GnnperfError(f"no commits between {good} and {bad}")
    return [good_sha] + commits


def bisect(good: str, bad: str, case: Case, metric: str = "aten_ops", repo: str = ".",
           options: GateOptions | None = None, log: Callable[[str], None] = lambda msg: None,
           library_repo: str | None = None, library_subdir: str = "") -> BisectResult:
    """Finds the first commit in ``GOOD..BAD`` where :obj:`metric` of
    :obj:`case` changed (work metrics) or regressed against GOOD (``time``,
    judged by the gate with :obj:`options`). With :obj:`library_repo`, the
    commits are a library's (its source, :obj:`library_subdir` of each
    commit, first on the path: a pure-Python library such as
    torch_geometric), gnnperf fixed at this process's own tree."""
    if metric not in METRICS:
        raise GnnperfError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    repo_path = Path(library_repo if library_repo is not None else repo).resolve()
    if library_repo is not None:
        try:
            _git(repo_path, "rev-parse", "--git-dir")  # a clone, bare or not
        except GnnperfError:
            raise GnnperfError(f"--library-repo {library_repo}: not a git checkout; give the "
                               f"library's clone (git clone URL PATH)") from None
    chain = commits_between(repo_path, good, bad)  # chain[0] is GOOD
    options = options or GateOptions()
    with tempfile.TemporaryDirectory(prefix="gnnperf-bisect-") as tmp:
        trees: dict[str, Path] = {}
        fixed = (arm_runner.fixed_gnnperf(Path(tmp) / "gnnperf", repo)
                 if library_repo is not None else None)

        def export(commit: str) -> Path:
            if commit not in trees:
                trees[commit] = arm_runner.export_ref(commit, Path(tmp) / commit[:12], repo_path)
            return trees[commit]

        def arm(commit: str, python: str) -> Arm:
            if fixed is None:
                return Arm(export(commit), python)
            return arm_runner.library_arm(fixed, export(commit), library_subdir, python,
                                          f"library {commit[:12]}", commit)

        if options.base_python != options.head_python:
            raise GnnperfError("bisect runs every commit under one Python; give one --python")
        options.validate(trees=library_repo is None)
        # One probe per commit for the whole search: the time search gates
        # GOOD against four or more commits, and a probe is an interpreter
        # start.
        probes: dict[str, ArmProbe] = {}

        def probe(commit: str) -> ArmProbe:
            if commit not in probes:
                probes[commit] = arm_runner.probe(arm(commit, options.head_python),
                                                  [case.variant])
            return probes[commit]

        known = probe(chain[-1]).known[case.variant]
        if known is None:  # a typo: no measurement can tell anything about it
            raise GnnperfError(f"unknown variant {case.variant!r} in {bad} ({chain[-1][:12]}); "
                               f"name one of its registry's variants, e.g. baseline@cora")
        if metric == "time":
            return _bisect_time(chain, case, options, arm, probe, log, repo_path)
        return _bisect_work(chain, case, metric, arm, log, repo_path, options.head_python)


def _subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit)


def _bisect_work(chain, case, metric, arm, log, repo, python) -> BisectResult:
    measured: list[tuple[str, object]] = []

    def value(commit: str):
        work = arm_runner.run_work({"arm": arm(commit, python)}, [case])["arm"][0]
        if "status" in work and work["status"] != "absent":  # a crash is not a value
            raise GnnperfError(f"{case.name} at {commit[:12]}: {work['status']}: "
                               f"{work['reason']}")
        found = None if "status" in work else work["exact"][metric]
        measured.append((commit, found))
        log(f"  {commit[:12]}: {metric} = {found}")
        return found

    good_value, bad_value = value(chain[0]), value(chain[-1])
    if good_value == bad_value:
        raise GnnperfError(f"{metric} of {case.name} is {good_value} at both ends; "
                           f"nothing changed between them (try --metric time)")
    lo, hi, hi_value = 0, len(chain) - 1, bad_value  # chain[lo] same as GOOD, chain[hi] not
    values = {0: good_value}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        values[mid] = value(chain[mid])
        if values[mid] == good_value:
            lo = mid
        else:
            hi, hi_value = mid, values[mid]
    return BisectResult(chain[hi], _subject(repo, chain[hi]), metric, values[lo], hi_value,
                        True, measured)


def _bisect_time(chain, case, options, arm, probe, log, repo) -> BisectResult:
    measured: list[tuple[str, object]] = []
    timing = replace(options, work_gate=False, time_gate=True, cases=[case])

    def gate(base: str, head: str):
        arms = {"base": arm(base, options.base_python), "head": arm(head, options.head_python)}
        result = compare_arms(timing, arms, [case], lambda msg: None,
                              {"base": probe(base), "head": probe(head)})
        verdicts = result.report["time"]["verdicts"]
        if not verdicts:
            why = "; ".join(result.report["head_failed"].values()) or "; ".join(
                result.report["base_failed"].values()) or "absent"
            raise GnnperfError(f"{case.name} cannot run at {base[:12]} or {head[:12]} ({why})")
        verdict = verdicts[0]
        measured.append((head, verdict["ratio"]))
        log(f"  {head[:12]} vs {base[:12]}: ratio {verdict['ratio']:.3f} "
            f"(p {verdict['p_slower']:.4f}, {verdict['pairs']} pairs) {verdict['verdict']}")
        return verdict

    good = chain[0]
    last = gate(good, chain[-1])
    if last["verdict"] != "REGRESSION":
        raise GnnperfError(f"the gate sees no regression of {case.name} from {good[:12]} to "
                           f"{chain[-1][:12]} (ratio {last['ratio']:.3f}, p {last['p_slower']:.3f}); "
                           f"nothing to bisect, or more --processes to see it")
    lo, hi = 0, len(chain) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if gate(good, chain[mid])["verdict"] == "REGRESSION":
            hi = mid
        else:
            lo = mid
    # The confirmation: the commit found against its own parent.
    confirm = gate(chain[hi - 1], chain[hi])
    return BisectResult(chain[hi], _subject(repo, chain[hi]), "time", confirm["base_median_s"],
                        confirm["head_median_s"], confirm["verdict"] == "REGRESSION", measured)

