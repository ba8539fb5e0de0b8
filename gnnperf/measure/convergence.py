"""Time to accuracy: a run's validation accuracy against its training time,
and when it first reaches a target (DAWNBench's time-to-accuracy, MLPerf
Training's time-to-train, per technique).

A faster epoch that needs twice the epochs is slower: what a practitioner
asks is how soon a variant reaches an accuracy. A run's clock starts with
its one-off work, counted once (the build: GraphSAINT's pre-sampling,
Cluster-GCN's partition, the trimmed receptive field; the compiler's
one-offs), then adds each epoch's training time; the compile is in the
first epoch's. The accuracy after every epoch is evaluated off the clock
(its cost is reported apart, :attr:`Convergence.eval_s`). Returns data and
never prints.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from gnnperf.errors import GnnperfError

#: The default target: this share of the reference variant's best validation accuracy.
DEFAULT_TARGET_SHARE = 0.99


@dataclass
class Reached:
    """Where a run first reached its target: the training seconds then
    (one-off work included), the epoch (1-based) and the test accuracy
    after it."""
    seconds: float
    epoch: int
    test_acc: float


@dataclass
class Convergence:
    r"""How one run's validation accuracy grew with its training time.

    Args:
        setup_s (float): One-off work before the first epoch, counted once
            at the start of the clock: the run's build (pre-sampling,
            partition, receptive field, the model and the data on the
            device) and the compiler's one-offs.
        epoch_s (list): Each epoch's training seconds. The epochs a run
            instruments (the work count, the memory profile: several-fold
            slower, untimed) are counted at the steady median
            (:attr:`estimated_epochs`); the first holds the compile.
        val_acc (list): Validation accuracy after each epoch.
        test_acc (list): Test accuracy after each epoch.
        eval_s (float): Seconds spent evaluating, all epochs together:
            off the clock, reported apart.
        estimated_epochs (list): The 1-based epochs counted at the median.
    """
    setup_s: float
    epoch_s: list[float] = field(default_factory=list)
    val_acc: list[float] = field(default_factory=list)
    test_acc: list[float] = field(default_factory=list)
    eval_s: float = 0.0
    estimated_epochs: list[int] = field(default_factory=list)

    def elapsed(self) -> list[float]:
        """The clock after each epoch: one-off work, then the epochs' sum."""
        total, out = self.setup_s, []
        for seconds in self.epoch_s:
            total += seconds
            out.append(total)
        return out

    @property
    def best_val(self) -> float:
        """The best validation accuracy of the run."""
        return max(self.val_acc, default=0.0)

    @property
    def test_at_best_val(self) -> float | None:
        """The test accuracy after the epoch of the best validation accuracy
        (the first such epoch): model selection by the validation set, as
        papers report it, where the last epoch's is a draw for a noisy
        learner. :obj:`None` for a run that was not evaluated per epoch."""
        return test_at_best_val(self.val_acc, self.test_acc)

    def reached(self, target: float) -> Reached | None:
        """When the validation accuracy first reached :obj:`target`;
        :obj:`None` when it never did."""
        for epoch, (seconds, val, test) in enumerate(
                zip(self.elapsed(), self.val_acc, self.test_acc), start=1):
            if val >= target:
                return Reached(seconds, epoch, test)
        return None

    def to_dict(self) -> dict:
        return asdict(self)


def test_at_best_val(val_acc: Sequence[float], test_acc: Sequence[float]) -> float | None:
    """The test accuracy after the first epoch whose validation accuracy is
    the run's best; :obj:`None` where no epoch was evaluated.

    Args:
        val_acc: Validation accuracy after each epoch.
        test_acc: Test accuracy after each epoch.
    """
    if not val_acc:
        return None
    return test_acc[max(range(len(val_acc)), key=lambda epoch: (val_acc[epoch], -epoch))]


class ConvergenceRecorder:
    """Builds a :class:`Convergence` while a run trains: :meth:`epoch`
    after each epoch with its seconds (:obj:`None` for an instrumented,
    untimed one), which evaluates the run off the clock; :meth:`finish`
    counts the untimed epochs at the median of :obj:`steady` ones."""

    def __init__(self, evaluate: Callable[[], dict[str, float]], setup_s: float) -> None:
        self._evaluate = evaluate
        self.curve = Convergence(setup_s)
        self._seconds: list[float | None] = []

    def epoch(self, seconds: float | None) -> dict[str, float]:
        """Records an epoch of :obj:`seconds` and evaluates the run after it."""
        start = time.perf_counter()
        accuracy = self._evaluate()
        self.curve.eval_s += time.perf_counter() - start
        self._seconds.append(seconds)
        self.curve.val_acc.append(accuracy["val"])
        self.curve.test_acc.append(accuracy["test"])
        return accuracy

    def finish(self, steady: Sequence[float]) -> Convergence:
        """The curve, untimed epochs counted at the median of :obj:`steady`."""
        timed = [s for s in self._seconds if s is not None]
        fill = statistics.median(steady or timed or [0.0])
        self.curve.epoch_s = [fill if s is None else s for s in self._seconds]
        self.curve.estimated_epochs = [i for i, s in enumerate(self._seconds, start=1) if s is None]
        return self.curve


@dataclass
class Target:
    """The validation accuracy every variant is timed to, and the rule
    that set it (in words, for the table and the JSON)."""
    accuracy: float
    rule: str


def check_target(target_acc: float | None, share: float) -> None:
    """One line for a target out of range, before anything trains."""
    if target_acc is not None and not 0.0 < target_acc <= 1.0:
        raise GnnperfError(f"--target-acc must be in (0, 1], got {target_acc}")
    if not 0.0 < share <= 1.0:
        raise GnnperfError(f"--target-share must be in (0, 1], got {share}")


def target_for(reference: str, reference_curves: Sequence[Convergence],
               target_acc: float | None = None,
               share: float = DEFAULT_TARGET_SHARE) -> Target | None:
    """The target: :obj:`target_acc` when given, else :obj:`share` of the
    reference variant's best validation accuracy (the median over its
    seeds' runs); :obj:`None` when neither is there (the reference did
    not run)."""
    check_target(target_acc, share)
    if target_acc is not None:
        return Target(target_acc, f"validation accuracy {target_acc:.3f} (--target-acc)")
    if not reference_curves:
        return None
    # The lower median: with two seeds the mean of their bests could lie
    # above the lower one's reach, and the reference would miss its own target.
    best = statistics.median_low(curve.best_val for curve in reference_curves)
    seeds = len(reference_curves)
    over = f"the lower median of {seeds} seeds' bests" if seeds > 1 else "its best"
    return Target(share * best, f"validation accuracy {share * best:.3f}: {share:.0%} of "
                                f"{reference}'s ({over}, {best:.3f})")


@dataclass
class TimeToTarget:
    """One variant's time to the target over its seeds' runs.

    Args:
        label (str): The variant (with its model when not the default).
        seeds (list): The seeds, in run order.
        seconds (list): Per seed, the training seconds to the target
            (one-off work included), :obj:`None` where it was not reached.
        epochs (list): Per seed, the epoch that reached it, or :obj:`None`.
        test_acc (list): Per seed, the test accuracy there, or :obj:`None`.
        epoch_s (float): The median steady epoch of the first seed's run.
        setup_s (float): The median one-off work over the seeds.
        eval_s (float): The median evaluation seconds (off the clock).
    """
    label: str
    seeds: list[int]
    seconds: list[float | None]
    epochs: list[int | None]
    test_acc: list[float | None]
    epoch_s: float
    setup_s: float
    eval_s: float

    @property
    def reached(self) -> int:
        """Seeds whose run reached the target."""
        return sum(s is not None for s in self.seconds)

    @property
    def median_s(self) -> float | None:
        """The median over seeds, a run that never reached it counted as
        infinitely slow: :obj:`None` ("not reached") unless more than half
        reached it."""
        values = sorted(math.inf if s is None else s for s in self.seconds)
        median = statistics.median(values) if values else math.inf
        return None if math.isinf(median) or math.isnan(median) else median

    @property
    def spread(self) -> tuple[float, float] | None:
        """The fastest and slowest seed that reached it."""
        done = [s for s in self.seconds if s is not None]
        return (min(done), max(done)) if done else None

    @property
    def median_test_acc(self) -> float | None:
        done = [a for a in self.test_acc if a is not None]
        return statistics.median(done) if done else None

    def to_dict(self) -> dict:
        return {**asdict(self), "reached": self.reached, "median_s": self.median_s,
                "spread_s": self.spread, "median_test_acc": self.median_test_acc}


def time_to_target(label: str, runs: Sequence[tuple[int, Convergence, float]],
                   target: Target) -> TimeToTarget:
    """:class:`TimeToTarget` of one variant from its runs: (seed, curve,
    median steady epoch seconds) each."""
    hits = [curve.reached(target.accuracy) for _, curve, _ in runs]
    return TimeToTarget(
        label=label, seeds=[seed for seed, _, _ in runs],
        seconds=[hit.seconds if hit else None for hit in hits],
        epochs=[hit.epoch if hit else None for hit in hits],
        test_acc=[hit.test_acc if hit else None for hit in hits],
        epoch_s=runs[0][2] if runs else math.nan,
        setup_s=statistics.median(curve.setup_s for _, curve, _ in runs),
        eval_s=statistics.median(curve.eval_s for _, curve, _ in runs))


@dataclass
class TimeToAccuracy:
    """Every variant's :class:`TimeToTarget` to one :class:`Target`, and
    the reference variant the default target and the verdict name."""
    target: Target
    rows: list[TimeToTarget]
    reference: str

    def verdict(self) -> str:
        """:func:`verdict` of the rows."""
        return verdict(self.rows, self.target, self.reference)

    def to_dict(self) -> dict:
        return {"target": asdict(self.target), "reference": self.reference,
                "rows": [row.to_dict() for row in self.rows], "verdict": self.verdict()}


def compare_runs(runs: dict[str, list[tuple[int, Convergence, float]]], reference: str,
                 target_acc: float | None = None,
                 share: float = DEFAULT_TARGET_SHARE) -> TimeToAccuracy | None:
    """The time to accuracy of every variant of :obj:`runs` (label -> its
    runs: (seed, curve, median steady epoch seconds) each); :obj:`None`
    when no target can be set (no --target-acc and the reference did not
    run)."""
    reference_curves = [curve for _, curve, _ in runs.get(reference, [])]
    target = target_for(reference, reference_curves, target_acc, share)
    if target is None:
        return None
    return TimeToAccuracy(target, [time_to_target(label, label_runs, target)
                                   for label, label_runs in runs.items()], reference)


def verdict(rows: Sequence[TimeToTarget], target: Target, reference: str) -> str:
    """One line: which variants reach the target first, by how much against
    the reference, which never do, and whether the ranking by epoch time
    says otherwise."""
    reached = sorted((r for r in rows if r.median_s is not None), key=lambda r: r.median_s)
    missed = [r.label for r in rows if r.median_s is None]
    seeds = max((len(r.seeds) for r in rows), default=1)
    of = f" (median of {seeds} seeds)" if seeds > 1 else ""
    if not reached:
        return f"time to accuracy: no variant reached {target.rule}"
    first = reached[0]
    ref = next((r for r in rows if r.label == reference), None)
    parts = [f"first {first.label} in {first.median_s:.2f} s{of}"]
    if ref is not None and ref.median_s is not None and ref is not first:
        parts.append(f"{ref.median_s / first.median_s:.1f}x sooner than {reference} "
                     f"({ref.median_s:.2f} s)")
    elif ref is not None and ref.median_s is None:
        parts.append(f"{reference} did not reach it")
    if len(reached) > 1:
        parts.append("then " + ", ".join(f"{r.label} {r.median_s:.2f} s" for r in reached[1:4])
                     + (", ..." if len(reached) > 4 else ""))
    fastest_epoch = min((r for r in rows if not math.isnan(r.epoch_s)),
                        key=lambda r: r.epoch_s, default=None)
    if fastest_epoch is not None and fastest_epoch is not first:
        parts.append(f"the fastest epoch is {fastest_epoch.label}'s, which "
                     + (f"reaches it in {fastest_epoch.median_s:.2f} s"
                        if fastest_epoch.median_s is not None else "does not reach it"))
    if missed:
        parts.append("not reached: " + ", ".join(missed))
    return f"time to accuracy ({target.rule}): " + "; ".join(parts)


__all__ = ["Convergence", "ConvergenceRecorder", "DEFAULT_TARGET_SHARE", "Reached", "Target",
           "TimeToAccuracy", "TimeToTarget", "check_target", "compare_runs", "target_for",
           "time_to_target", "verdict"]
