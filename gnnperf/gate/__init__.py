"""The regression workflow: the A/B gate (exact work metrics and an
interleaved, statistically tested step time) between two arms, each a tree
under a Python environment; ``bisect`` for the first changed commit; the
sensitivity study; the Markdown report. ``gnnperf gate``, ``gnnperf bisect``
and ``gnnperf sensitivity`` are its command lines."""
from gnnperf.gate.arms import Arm, ArmProbe, checkout_top, copy_tree, export_ref, probe, run_arms, run_work
from gnnperf.gate.bisection import BisectResult, bisect, commits_between, max_measurements
from gnnperf.gate.compare import GateOptions, GateResult, compare_arms, run_gate, time_gate
from gnnperf.gate.report import format_time, format_work, markdown
from gnnperf.gate.stats import (TimeSamples, Verdict, adaptive_test, decide, inconclusive, judge,
                                pair_log_ratios, pair_test)
from gnnperf.gate.work import compare_work

__all__ = ["Arm", "ArmProbe", "BisectResult", "GateOptions", "GateResult", "TimeSamples", "Verdict",
           "adaptive_test", "bisect", "checkout_top", "commits_between", "compare_arms", "compare_work", "copy_tree", "decide",
           "export_ref", "format_time", "format_work", "inconclusive", "judge", "markdown", "max_measurements",
           "pair_log_ratios", "pair_test", "probe", "run_arms", "run_gate", "run_work",
           "time_gate"]
