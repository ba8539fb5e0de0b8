"""One gate run: the arms set up, the exact work gate, the time gate, the report."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from gnnperf.measure.case import DEFAULT_DATASETS, DEFAULT_MODEL, Case, default_cases
from gnnperf.data import check_dataset_name
from gnnperf.errors import GnnperfError
from gnnperf.gate import arms as arm_runner
from gnnperf.gate import explain as explainer
from gnnperf.gate.arms import Arm, ArmProbe
from gnnperf.gate.render import format_explain, format_time, format_work, markdown
from gnnperf.gate.decision import TimeSamples, adaptive_budget, decide, inconclusive
from gnnperf.gate.work import compare_work


#: When a gate run explains what moved (:attr:`GateOptions.explain`).
EXPLAIN_WHEN = ("never", "changes", "always")


@dataclass
class GateOptions:
    r"""What one gate run compares and how.

    In a gnnperf tree the arms are two gnnperf trees. When :obj:`head_dir`
    is another project's tree (a model repository: :obj:`library`), the arms
    are two commits of it with gnnperf fixed, as ``gnnperf bisect
    --library-repo`` runs a library's commits: each arm puts its commit's
    tree (:obj:`library_subdir` of it) first on the path and runs the
    installed gnnperf, so a model by import path is each commit's own.

    Args:
        base (str): git ref of the base tree (default ``HEAD``; with only
            Python arms given, the head tree itself; required in a model
            repository).
        base_dir (str): A checkout to use as the base instead of a ref.
        head_dir (str): The tree under test (the CLI's default: the git top
            level of the current directory, :func:`default_head_dir`), a
            gnnperf tree or a model repository's; ``None`` for environment
            arms outside a gnnperf checkout: both arms run a copy of the
            installed gnnperf.
        repo (str): The repository :obj:`base` is read from (default: the head tree).
        library_subdir (str): In a model repository, the folder of its tree
            that holds the package (e.g. ``src``; default: the top).
        base_python (str), head_python (str): Interpreters of the arms
            (other virtual environments: dependency releases as arms).
        variants (list): Variants (``None``: the head tree's standard ones).
        datasets (tuple): Graphs every variant runs on.
        models (tuple): Models every variant trains (``variant@dataset@model``
            cases; a variant that cannot run a model is left out of the
            default set, and an error when named in :obj:`variants`).
        processes (int): Worker process pairs (the t-test's replicates).
        max_processes (int): The adaptive budget: an inconclusive verdict
            ("same" with its 95% interval past the threshold,
            :func:`~gnnperf.gate.decision.inconclusive`) gets one more pair at
            a time up to this many (``None``: 3 x :obj:`processes`;
            :obj:`processes` turns adaptivity off).
        rounds (int): Interleaved rounds per pair.
        sample_ms (float): Target CPU time of one timed block of steps.
        clock (str): ``cpu`` (the worker's CPU time) or ``wall``.
        threshold (float): Minimum relative slowdown that may fail.
        alpha (float): One-sided significance level.
        time_gate (bool), work_gate (bool): Which gates run.
        accept_work_change (bool): Report a changed work metric without failing.
        pin_cpus (bool): Both arms' workers of a pair on one CPU (see
            :func:`~gnnperf.gate.arms.run_arms`).
        cases (list): Explicit :class:`~gnnperf.measure.case.Case` s instead of
            :obj:`variants` x :obj:`datasets`.
        explain (str): When to explain what moved
            (:mod:`gnnperf.gate.explain`: each arm's step profiled, the
            shift grouped, the per-op overhead): ``changes`` (``gnnperf
            gate``'s default) when a case regressed or changed its work, so
            a passing gate costs nothing more; ``always`` every case
            (``--explain``); ``never`` (the default here: bisect's and the
            history's gate runs are searches, not reports).
    """
    base: str | None = None
    base_dir: str | None = None
    head_dir: str | None = "."
    repo: str | None = None
    base_python: str = sys.executable
    head_python: str = sys.executable
    variants: list[str] | None = None
    datasets: tuple[str, ...] = DEFAULT_DATASETS
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    processes: int = 6
    max_processes: int | None = None
    rounds: int = 30
    sample_ms: float = 12.0
    clock: str = "cpu"
    threshold: float = 0.03
    alpha: float = 0.01
    time_gate: bool = True
    work_gate: bool = True
    accept_work_change: bool = False
    pin_cpus: bool = True
    cases: list[Case] = field(default_factory=list)
    library_subdir: str = ""
    explain: str = "never"

    def validate(self, trees: bool = True) -> None:
        """Checks every option and, with :obj:`trees`, the trees the arms come
        from; ``trees=False`` where the caller makes the arms itself (a
        library's bisect: its commits, gnnperf fixed as this process has it)."""
        if self.processes < 3 or self.rounds < 3:
            raise GnnperfError("need --processes >= 3 (the t-test's replicates) and --rounds >= 3")
        if self.budget < self.processes:
            raise GnnperfError(f"--max-processes {self.max_processes} is below --processes "
                               f"{self.processes}; give at least as many (equal: no adaptivity)")
        if self.clock not in ("cpu", "wall"):
            raise GnnperfError(f"--clock {self.clock!r}: use cpu or wall")
        if not 0 <= self.threshold < 1 or not 0 < self.alpha < 1:
            raise GnnperfError("need 0 <= --threshold < 1 and 0 < --alpha < 1")
        if self.sample_ms <= 0:
            raise GnnperfError("--sample-ms must be > 0")
        if self.explain not in EXPLAIN_WHEN:
            raise GnnperfError(f"explain={self.explain!r}: use one of {', '.join(EXPLAIN_WHEN)}")
        if not (self.time_gate or self.work_gate):
            raise GnnperfError("--no-time and --no-work together leave nothing to compare")
        for python in (self.base_python, self.head_python):
            if not Path(python).is_file():
                raise GnnperfError(f"interpreter {python} not found; give a venv's bin/python")
        if trees and self.head_dir is None and not self.environment_arms:
            raise GnnperfError("comparing trees (--base, --base-dir) needs a gnnperf "
                               "checkout: cd into one, or give --head-dir")
        # A head dir that is not a folder, a misplaced --library-subdir: one line.
        head_library = self.head_library if trees else None
        if trees and self.library:
            if self.base is None and self.base_dir is None and not self.environment_arms:
                raise GnnperfError(f"{self.head_dir} is not a gnnperf tree, so the gate compares "
                                   f"two of its commits (gnnperf fixed); name the base, e.g. "
                                   f"--base origin/main")
            if self.base is not None and self.repo is None and arm_runner.git_top(
                    self.head_dir) is None:
                raise GnnperfError(f"{self.head_dir} is neither a gnnperf tree nor a git "
                                   f"checkout; cd into your model repository, or give "
                                   f"--head-dir")
            if self.base_dir and not (Path(self.base_dir) / self.library_subdir).is_dir():
                raise GnnperfError(f"--base-dir {self.base_dir} has no folder "
                                   f"{self.library_subdir!r} (--library-subdir); give a "
                                   f"checkout of the model repository")
        elif trees and self.base_dir and not (Path(self.base_dir) / "gnnperf").is_dir():
            raise GnnperfError(f"--base-dir {self.base_dir} has no gnnperf folder; give a checkout")
        for name in self.datasets:
            check_dataset_name(name)
        from gnnperf.models import get_model
        from gnnperf.variants import get_variant, model_pairs
        # A model by import path in a model repository is checked as the
        # head arm imports it: from the head's tree.
        with arm_runner.first_on_path(head_library):
            for name in self.models:
                get_model(name)  # an unknown model or a failing import path: one line
            known = []
            for variant in self.variants or ():
                try:
                    known.append(get_variant(variant))
                except GnnperfError:
                    continue  # maybe only one arm knows it: the probes judge
            # Before any worker starts: a named variant that runs with none of the models.
            model_pairs(known, list(self.models), named=True)
        for case in self.cases:
            check_dataset_name(case.dataset)

    @property
    def environment_arms(self) -> bool:
        """Whether the arms are two environments over one tree (only
        interpreters given), not two trees."""
        return self.base is None and self.base_dir is None and self.base_python != self.head_python

    @property
    def library(self) -> bool:
        """Whether the head is a model repository's tree, not gnnperf's: the
        arms are then two of its commits with gnnperf fixed."""
        return self.head_dir is not None and not arm_runner.is_gnnperf_tree(self.head_dir)

    @property
    def head_library(self) -> Path | None:
        """What the head arm puts first on its path in a model repository
        (see :func:`head_library`); ``None`` in a gnnperf tree."""
        return head_library(self.head_dir, self.library_subdir)

    @property
    def budget(self) -> int:
        """Process pairs a verdict may take at most."""
        return adaptive_budget(self.processes, self.max_processes)


@dataclass
class GateResult:
    """A gate run's outcome: :obj:`failed`, the printed text and the JSON
    report (samples, verdicts, work metrics)."""
    failed: bool
    text: str
    report: dict

    @property
    def markdown(self) -> str:
        return markdown(self.report)


def run_gate(options: GateOptions, log: Callable[[str], None] = lambda msg: None
             ) -> GateResult:
    """Runs the exact work gate and the statistical time gate on the base and
    head arms; ``failed`` when a work metric changed (unless accepted), a
    benchmark's time regressed, a benchmark the base has is gone from the
    head, or the head cannot measure one (a crash, a non-finite loss).
    Unknown names, and a run that measures nothing, are errors."""
    options.validate()
    with tempfile.TemporaryDirectory(prefix="gnnperf-gate-") as tmp:
        base, head = (_library_arms if options.library else _tree_arms)(options, Path(tmp))
        arms = {"base": base, "head": head}
        asked = options.variants or []
        # The first workers (work, else the first timing pair) are the probes.
        started, probes = arm_runner.start_probed("work" if options.work_gate else "time",
                                                  arms, asked)
        try:
            unknown = [v for v in asked if all(p.known.get(v) is None for p in probes.values())]
            if unknown:  # a typo, not a benchmark removed: neither arm knows it
                from gnnperf.variants import get_variant
                get_variant(unknown[0])  # the registry's own one-line error
                raise GnnperfError(f"unknown variant {unknown[0]!r} in both arms")
            # The head's registry: in a model repository the fixed gnnperf's,
            # the installed one's standard variants.
            with arm_runner.first_on_path(options.head_library):
                cases = options.cases or _combining(default_cases(
                    options.variants or probes["head"].standard_variants, options.datasets,
                    options.models), log)
            return compare_arms(options, arms, cases, log, probes, started)
        finally:
            for worker in started.values():  # any never given its cases
                worker.close()


def _tree_arms(options: GateOptions, tmp: Path) -> tuple[Arm, Arm]:
    """The base and head arms in a gnnperf tree (or, for environment arms
    outside one, the installed gnnperf copied to :obj:`tmp`): two gnnperf
    trees, the base a checkout or a ref exported to :obj:`tmp`."""
    if options.head_dir is None:
        head_tree = arm_runner.installed_tree(tmp / "installed")
        head = Arm(head_tree, options.head_python, "installed gnnperf")
    else:
        head_tree = Path(options.head_dir).resolve()
        head = Arm(head_tree, options.head_python)
    if options.base_dir:
        base = Arm(Path(options.base_dir).resolve(), options.base_python)
    elif options.environment_arms:
        base = Arm(head_tree, options.base_python, head.label)  # one tree, two environments
    else:
        label = options.base or "HEAD"
        repo = options.repo or head_tree
        commit = arm_runner.resolve_commit(label, repo)
        base = Arm(arm_runner.export_ref(commit, tmp / "base", repo), options.base_python,
                   label, commit)
    return base, head


def head_library(head_dir: str | None, library_subdir: str = "") -> Path | None:
    """The folder a model repository's head arm puts first on its path:
    :obj:`library_subdir` of :obj:`head_dir` when that is not a gnnperf tree
    (``None`` in a gnnperf tree, or without a head tree); a one-line error
    for a subfolder that is not there, or one given in a gnnperf tree."""
    if head_dir is not None and not Path(head_dir).is_dir():
        raise GnnperfError(f"--head-dir {head_dir} is not a folder; give a checkout")
    if head_dir is None or arm_runner.is_gnnperf_tree(head_dir):
        if library_subdir:
            raise GnnperfError("--library-subdir applies in a model repository (a tree that "
                               "is not gnnperf's); drop it, or cd into that repository")
        return None
    library = Path(head_dir).resolve() / library_subdir
    if not library.is_dir():
        raise GnnperfError(f"--library-subdir {library_subdir!r} is not a folder of "
                           f"{head_dir}; give the folder that holds the package (e.g. src)")
    return library


def _library_arms(options: GateOptions, tmp: Path) -> tuple[Arm, Arm]:
    """The base and head arms in a model repository: its base ref (exported
    to :obj:`tmp`, or :obj:`~GateOptions.base_dir`) and its working tree,
    each first on the path of an arm running the installed gnnperf, fixed
    (one copy, the same for both), as ``bisect --library-repo`` runs a
    library's commits. The ref is resolved before anything is copied or
    started."""
    head_tree = Path(options.head_dir).resolve()
    top = arm_runner.git_top(head_tree) or head_tree
    repo = Path(options.repo).resolve() if options.repo else top
    commit, label = None, ""
    if options.base_dir:
        base_tree = Path(options.base_dir).resolve()
    elif options.environment_arms:
        base_tree = head_tree  # one tree, two environments
    else:
        commit = _library_commit(options.base, repo)
        label = options.base
        # The head dir's place in its checkout, in the exported commit too.
        base_tree = (arm_runner.export_ref(commit, tmp / "base", repo)
                     / head_tree.relative_to(top))
    fixed = arm_runner.fixed_gnnperf(tmp / "gnnperf")
    head = arm_runner.library_arm(fixed, head_tree, options.library_subdir, options.head_python,
                                  _branch(top))
    base = arm_runner.library_arm(fixed, base_tree, options.library_subdir, options.base_python,
                                  head.label if options.environment_arms else label, commit)
    return base, head


def _library_commit(ref: str, repo: Path) -> str:
    """The commit :obj:`ref` names in the model repository :obj:`repo`, or
    the one line that says how to name one."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet",
                           f"{ref}^{{commit}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GnnperfError(f"--base {ref}: no such commit, branch or tag in {repo}; name one "
                           f"of its refs, e.g. --base main (a remote's branch after git fetch)")
    return proc.stdout.strip()


def _branch(top: Path) -> str:
    """The branch a checkout is on (``HEAD`` when detached; ``""`` outside
    a checkout): the head arm's name."""
    if arm_runner.git_top(top) is None:
        return ""
    proc = subprocess.run(["git", "-C", str(top), "symbolic-ref", "--short", "--quiet", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "HEAD"


def _combining(cases: list[Case], log: Callable[[str], None]) -> list[Case]:
    """The cases whose variant can train their model (this checkout's
    registry); one that cannot is left out with a line saying why (a named
    variant that runs with none of the models was refused in validate)."""
    from gnnperf.models import get_model
    from gnnperf.variants import get_variant
    kept = []
    for case in cases:
        try:
            spec = get_variant(case.variant)
        except GnnperfError:  # only the other arm knows it: the arms judge it
            spec = None
        reason = spec is not None and case.model != DEFAULT_MODEL and spec.cannot_run_with(
            get_model(case.model))
        if reason:
            log(f"left out {case.name}: {reason}")
        else:
            kept.append(case)
    return kept


def _head_errors(states: dict, names: list[str]) -> list[str]:
    """The cases the head arm failed to measure (a crash, a non-finite loss)."""
    return [c for c in names if states.get(c, {}).get("head", {}).get("status") == "error"]


def _not_measured(entry) -> dict | None:
    """The status of a work or time entry that is not a measurement."""
    return entry if isinstance(entry, dict) and "status" in entry else None


def compare_arms(options: GateOptions, arms: dict[str, Arm], cases: list[Case],
                 log: Callable[[str], None], probes: dict[str, ArmProbe] | None = None,
                 started: dict | None = None) -> GateResult:
    """The gate on two prepared arms: the report starts with both arms
    (tree, commit, dirty or not, Python, torch, PyG); each case is measured,
    new (the base lacks it), removed (the head lacks it: fails), n/a (a
    declared "cannot here" in an arm) or failed (the head cannot measure it:
    fails; the base cannot: reported, not compared). :obj:`started`: the
    arms' first workers, already running (:func:`~gnnperf.gate.arms.start_probed`:
    work workers when the work gate runs, else the first timing pair)."""
    probes = probes or {name: arm_runner.probe(arm) for name, arm in arms.items()}
    names = [case.name for case in cases]
    report: dict = {"arms": {name: probe.to_dict() for name, probe in probes.items()},
                    "cases": names,
                    "settings": {k: getattr(options, k) for k in (
                        "processes", "rounds", "sample_ms", "clock", "threshold", "alpha",
                        "pin_cpus")} | {"max_processes": options.budget}}
    text = [f"{name}: {probe.headline()}" for name, probe in probes.items()]
    fixed = {probe.gnnperf for probe in probes.values() if probe.gnnperf_fixed}
    if fixed:  # the arms are a library's commits: say what does not change
        text.insert(0, f"gnnperf {', '.join(sorted(fixed))} fixed in both arms; each arm "
                       f"puts its commit's tree first on the path (a model by import path is "
                       f"that commit's)")
    states: dict[str, dict[str, dict]] = {}  # case -> arm -> status of a case not measured
    measured: set[str] = set()
    if options.work_gate:
        log(f"work metrics of {len(cases)} benchmarks in both arms ...")
        work = arm_runner.run_work(arms, cases, started)
        for arm, entries in work.items():
            for case, entry in zip(names, entries):
                if _not_measured(entry):
                    states.setdefault(case, {})[arm] = entry
        measurable = [not any(_not_measured(work[arm][i]) for arm in work)
                      for i in range(len(cases))]
        rows = compare_work([n for n, ok in zip(names, measurable) if ok],
                            [e for e, ok in zip(work["base"], measurable) if ok],
                            [e for e, ok in zip(work["head"], measurable) if ok])
        measured |= {n for n, ok in zip(names, measurable) if ok}
        report["work"] = {"base": work["base"], "head": work["head"], "rows": rows}
        text += ["== exact work metrics (one training step)", format_work(rows)]
        changed = any(not row["same"] for row in rows)
        broken = _head_errors(states, names)
        if broken:
            text.append(f"work gate: FAILED (the head cannot measure {', '.join(broken)})")
        elif changed and not options.accept_work_change:
            text.append("work gate: FAILED (a work metric changed; --accept-work-change "
                        "if intended)")
        else:
            text.append("work gate: " + ("changed, accepted" if changed else "passed"))
        report["work"]["failed"] = bool(broken) or (changed and not options.accept_work_change)
    if options.time_gate:
        log(f"timing {len(cases)} benchmarks: {options.processes} process pairs x "
            f"{options.rounds} interleaved rounds (up to {options.budget} pairs where "
            f"inconclusive) ...")
        start = time.perf_counter()
        before = set(_head_errors(states, names))
        samples = time_gate(arms, [c for c in cases if c.name not in states], options,
                            states, log, None if options.work_gate else started)
        verdicts = [decide(s, options.threshold, options.alpha) for s in samples]
        measured |= {v.case for v in verdicts}
        report["time"] = {"samples": [asdict(s) for s in samples],
                          "verdicts": [asdict(v) for v in verdicts],
                          "seconds": time.perf_counter() - start}
        text += [f"== step time, {options.clock} clock (base = A, head = B)",
                 format_time(verdicts, options.threshold, options.alpha)]
        report["time"]["inconclusive"] = [v.case for v in verdicts if v.verdict == "inconclusive"]
        for v in verdicts:
            if v.verdict == "inconclusive":  # never read as "no regression"
                text.append(f"{v.case}: inconclusive at this noise: {v.pairs} pairs, interval "
                            f"[{v.ci_low:.3f}, {v.ci_high:.3f}] reaches past the "
                            f"{options.threshold:.0%} threshold; more pairs (--max-processes) "
                            f"or a work metric (the work gate) resolve it")
        regressions = [v.case for v in verdicts if v.verdict == "REGRESSION"]
        broken = [c for c in _head_errors(states, names) if c not in before]
        report["time"]["failed"] = bool(regressions or broken)
        if regressions or broken:
            text.append(f"time gate: FAILED ({', '.join(regressions + broken)})")
        elif not verdicts:  # never "passed" over an empty table
            text.append("time gate: nothing timed (see the lines below)")
        else:
            undecided = report["time"]["inconclusive"]
            text.append("time gate: passed" + (f" ({len(undecided)} inconclusive: "
                                               f"{', '.join(undecided)})" if undecided else ""))
    _explain(options, arms, cases, report, text, log)
    removed, new, unavailable, head_failed, base_failed = [], [], {}, {}, {}
    for case in names:
        mine = states.get(case, {})
        kinds = {arm: entry["status"] for arm, entry in mine.items()}
        if kinds.get("head") == "error":
            head_failed[case] = mine["head"]["reason"]
        elif kinds.get("head") == "absent" and kinds.get("base") != "absent":
            removed.append(case)
        elif kinds.get("base") == "absent" and kinds.get("head") != "absent":
            new.append(case)
        elif "unavailable" in kinds.values():
            unavailable[case] = next(e["reason"] for e in mine.values()
                                     if e["status"] == "unavailable")
        elif kinds.get("base") == "error":
            base_failed[case] = mine["base"]["reason"]
    report.update(removed=removed, new=new, unavailable=unavailable, head_failed=head_failed,
                  base_failed=base_failed)
    for case, reason in head_failed.items():
        text.append(f"{case}: FAILED in the head: {reason}")
    for case in removed:
        text.append(f"{case}: FAILED: removed or renamed (the base has it, the head does not)")
    for case in new:
        text.append(f"{case}: new (the base lacks it: not compared)")
    for case, reason in unavailable.items():
        text.append(f"{case}: n/a ({reason})")
    for case, reason in base_failed.items():
        text.append(f"{case}: not compared: the base cannot measure it ({reason})")
    if not measured and not removed and not head_failed:
        why = "; ".join(f"{case}: {next(iter(states[case].values()))['reason']}"
                        for case in names if case in states)
        raise GnnperfError(f"no benchmark was measured in both arms ({why or 'none asked'}); "
                           f"nothing passed, so the gate does not say it did")
    failed = bool(removed or head_failed or report.get("work", {}).get("failed")
                  or report.get("time", {}).get("failed"))
    report["failed"] = failed
    return GateResult(failed, "\n".join(text), report)


def _explain(options: GateOptions, arms: dict[str, Arm], cases: list[Case], report: dict,
             text: list[str], log: Callable[[str], None]) -> None:
    """Adds the explanation of what moved (``report["explain"]`` and its
    text) as :attr:`GateOptions.explain` says; a failure to explain is
    reported, and never changes the verdict."""
    if options.explain == "never":
        return
    verdicts = report.get("time", {}).get("verdicts", [])
    rows = report.get("work", {}).get("rows", [])
    always = options.explain == "always"
    wanted = explainer.to_explain(verdicts, rows, always)
    if not wanted and not always:
        return
    ops = {}
    for case, entry in zip(report["cases"], report.get("work", {}).get("base", [])):
        if isinstance(entry, dict) and "exact" in entry:
            ops[case] = entry["exact"]["aten_ops"]
    try:
        section = explainer.explain(arms, [c for c in cases if c.name in wanted], verdicts, ops,
                                    options.alpha, options.pin_cpus, log)
    except (GnnperfError, OSError) as exc:
        section = {"error": str(exc)}
    report["explain"] = section
    text.append(format_explain(section))


def default_head_dir(base: str | None, base_dir: str | None, base_python: str,
                     head_python: str) -> str | None:
    """The head tree when none is given: the gnnperf checkout the current
    directory is in; outside one, for environment arms, ``None`` (the
    installed gnnperf); else the top of the git checkout you stand in (a
    model repository: the gate then compares its commits, gnnperf fixed),
    or the one-line error that trees need git."""
    from gnnperf.gate.arms import checkout_top, gnnperf_checkout

    top = gnnperf_checkout()
    if top is not None:
        return str(top)
    if base is None and base_dir is None and base_python != head_python:
        return None
    return str(checkout_top())


def time_gate(arms: dict[str, Arm], cases: list[Case], options: GateOptions,
              states: dict, log: Callable[[str], None] = lambda msg: None,
              started: dict | None = None) -> list[TimeSamples]:
    """Interleaved timing of :obj:`cases` in the ``base`` and ``head`` arms,
    as samples per case (on the gate's clock, the other one beside).
    Adaptive: a case whose verdict is inconclusive after
    :obj:`options.processes` pairs (:func:`~gnnperf.gate.decision.inconclusive`)
    is timed in one more pair at a time, alone, until it is decided or has
    :attr:`~GateOptions.budget` pairs, as Swift's benchmark driver re-runs
    its suspicious subset. A case an arm cannot time goes into :obj:`states`.
    :obj:`started`: the first pair's workers, already running."""
    start = time.perf_counter()

    def timed(subset: list[Case], pairs: int, first_set: int, steps=None, started=None):
        return arm_runner.run_arms(
            arms, subset, pairs, options.rounds, options.sample_ms, pin_cpus=options.pin_cpus,
            first_set=first_set, steps=steps, states=states, started=started,
            progress=lambda i, n: log(f"  pair {i} done ({time.perf_counter() - start:.0f} s)"))

    other = "wall" if options.clock == "cpu" else "cpu"
    if not cases:
        return []
    steps, times = timed(cases, options.processes, 0, started=started)
    samples: dict[str, TimeSamples] = {}
    block = {}
    for case, n in zip(cases, steps):
        if n and case.name not in states:
            t = times[case.name]
            samples[case.name] = TimeSamples(case.name, n, options.clock,
                                             t["base"][options.clock], t["head"][options.clock],
                                             t["base"][other], t["head"][other])
            block[case.name] = n

    def open_cases() -> list[Case]:
        out = []
        for case in cases:
            s = samples.get(case.name)
            if s is None or case.name in states or len(s.a) >= options.budget:
                continue
            v = decide(s, options.threshold, options.alpha)
            if inconclusive(v.ratio, v.p_slower, v.p_faster, v.ci_low, v.ci_high,
                            options.threshold, options.alpha):
                out.append(case)
        return out

    next_set = options.processes
    while (pending := open_cases()):
        log(f"  inconclusive after {next_set} pairs: {', '.join(c.name for c in pending)}; "
            f"one more pair")
        _, more = timed(pending, 1, next_set, [block[c.name] for c in pending])
        next_set += 1
        for case in pending:
            if case.name in states:
                continue
            s, t = samples[case.name], more[case.name]
            s.a += t["base"][options.clock]
            s.b += t["head"][options.clock]
            s.a_other += t["base"][other]
            s.b_other += t["head"][other]
    return [samples[c.name] for c in cases if c.name in samples and c.name not in states]
