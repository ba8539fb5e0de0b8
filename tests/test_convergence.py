"""Time to accuracy: the curve, the target rule, "not reached", one-off
work counted once and evaluation off the clock."""
import time

import pytest

from gnnperf.errors import GnnperfError
from gnnperf.measure.convergence import (Convergence, Target, compare_runs, target_for,
                                         time_to_target)
from gnnperf.measure.runner import measure_variant, train_to_target
from gnnperf.variants import TrainConfig, get_variant


def curve(setup_s, epoch_s, val, test=None):
    return Convergence(setup_s, list(epoch_s), list(val), list(test or val))


def test_one_off_work_is_counted_once_at_the_start_of_the_clock():
    run = curve(2.0, [1.0, 1.0, 1.0], [0.2, 0.5, 0.8], [0.3, 0.6, 0.7])
    assert run.elapsed() == [3.0, 4.0, 5.0]
    hit = run.reached(0.5)
    assert (hit.seconds, hit.epoch, hit.test_acc) == (4.0, 2, 0.6)


def test_a_variant_that_never_reaches_the_target_is_not_reached_never_a_time():
    target = Target(0.9, "validation accuracy 0.900")
    slow = time_to_target("amp", [(0, curve(0.0, [0.1] * 3, [0.5, 0.6, 0.7]), 0.1)], target)
    assert slow.seconds == [None] and slow.median_s is None and slow.spread is None
    assert slow.to_dict()["median_s"] is None
    race = compare_runs({"baseline": [(0, curve(0.0, [0.1] * 3, [0.5, 0.9, 0.95]), 0.1)],
                         "amp": [(0, curve(0.0, [0.1] * 3, [0.5, 0.6, 0.7]), 0.05)]},
                        "baseline", target_acc=0.9)
    from gnnperf.report import format_time_to_accuracy
    text = format_time_to_accuracy(race)
    amp_line = next(line for line in text.splitlines() if line.startswith("amp"))
    assert "not reached" in amp_line
    assert "not reached: amp" in race.verdict()
    # The fastest epoch (amp's) is named where it is not the first to the target.
    assert "the fastest epoch is amp's, which does not reach it" in race.verdict()


def test_over_seeds_the_median_counts_a_miss_as_never():
    target = Target(0.8, "")
    runs = [(seed, curve(0.0, [1.0] * 3, values), 1.0) for seed, values in
            enumerate([[0.8, 0.8, 0.8], [0.1, 0.1, 0.1], [0.1, 0.9, 0.9]])]
    row = time_to_target("x", runs, target)
    assert row.seconds == [1.0, None, 2.0] and row.reached == 2
    assert row.median_s == 2.0 and row.spread == (1.0, 2.0)
    row = time_to_target("x", runs[:2] + [(2, curve(0.0, [1.0], [0.1]), 1.0)], target)
    assert row.median_s is None  # two of three never reached it


def test_the_target_is_a_share_of_the_references_best_median_over_seeds():
    reference = [curve(0.0, [1.0] * 2, best) for best in ([0.5, 0.80], [0.7, 0.78], [0.9, 0.6])]
    target = target_for("baseline", reference, share=0.99)
    assert target.accuracy == pytest.approx(0.99 * 0.80)  # bests 0.80, 0.78, 0.90
    assert "99% of baseline's" in target.rule and "3 seeds" in target.rule
    assert target_for("baseline", reference, target_acc=0.7).accuracy == 0.7
    assert target_for("baseline", [], share=0.99) is None  # no reference, no default target
    for bad in ({"target_acc": 1.5}, {"target_acc": 0.0}, {"share": 0.0}, {"share": 1.2}):
        with pytest.raises(GnnperfError, match="must be in"):
            target_for("baseline", reference, **bad)


def test_a_run_records_its_accuracy_after_every_epoch_off_the_clock(cora_dataset, monkeypatch):
    # A slow evaluation (0.2 s a call) must not reach the training clock.
    from gnnperf.variants.base import TrainingRun
    real = TrainingRun.evaluate

    def slow_evaluate(self):
        time.sleep(0.2)
        return real(self)
    monkeypatch.setattr(TrainingRun, "evaluate", slow_evaluate)
    result = measure_variant(get_variant("baseline"), cora_dataset, TrainConfig(epochs=6),
                             "cpu", warmup_epochs=3)
    run = Convergence(**result.convergence)
    assert len(run.val_acc) == len(run.epoch_s) == 6
    assert run.eval_s >= 6 * 0.2
    assert sum(run.epoch_s) < 6 * 0.2  # a Cora epoch takes milliseconds
    # The instrumented epochs (work count, memory) count at the steady median.
    assert run.estimated_epochs == [2, 3]
    assert run.epoch_s[1] == run.epoch_s[2] == pytest.approx(result.epoch_time.median)
    assert run.epoch_s[0] == pytest.approx(result.first_epoch_s)
    assert run.val_acc[-1] == pytest.approx(result.val_acc)
    assert result.seed == 0


def test_the_build_and_its_one_off_work_start_the_clock_once(cora_dataset):
    # saint pre-samples in its build: in the clock's start, not in an epoch.
    result = measure_variant(get_variant("saint"), cora_dataset, TrainConfig(epochs=4), "cpu",
                             warmup_epochs=2)
    run = Convergence(**result.convergence)
    assert run.setup_s >= result.setup_seconds["presample"] > 0
    assert run.elapsed()[0] == pytest.approx(run.setup_s + result.first_epoch_s)
    assert run.elapsed()[-1] == pytest.approx(run.setup_s + sum(run.epoch_s))


def test_train_to_target_stops_at_the_target_and_times_every_epoch(cora_dataset):
    config = TrainConfig(epochs=60)
    run = train_to_target(get_variant("baseline"), cora_dataset, config, "cpu", 0.5)
    hit = run.reached(0.5)
    assert hit is not None and hit.epoch == len(run.val_acc) < 60
    assert run.estimated_epochs == [] and all(s > 0 for s in run.epoch_s)
    never = train_to_target(get_variant("baseline"), cora_dataset, TrainConfig(epochs=3), "cpu",
                            1.01)
    assert never.reached(1.01) is None and len(never.val_acc) == 3


def test_test_accuracy_is_also_read_at_the_best_validation_epoch():
    """A noisy learner's last epoch is a draw: the test accuracy at the first
    epoch of the best validation accuracy is the one papers report."""
    from gnnperf.measure.convergence import Convergence, test_at_best_val
    assert test_at_best_val([0.5, 0.8, 0.7, 0.8], [0.4, 0.75, 0.9, 0.6]) == 0.75
    assert test_at_best_val([], []) is None
    curve = Convergence(setup_s=0.0, epoch_s=[0.1, 0.1, 0.1], val_acc=[0.6, 0.9, 0.5], test_acc=[0.5, 0.7, 0.8])
    assert curve.test_at_best_val == 0.7
