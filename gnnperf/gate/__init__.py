"""The regression workflow: the A/B gate (exact work metrics and an
interleaved, statistically tested step time) between two arms, each a tree
under a Python environment; ``bisect`` for the first changed commit; the
sensitivity study; the Markdown report. ``gnnperf gate``, ``gnnperf bisect``
and ``gnnperf sensitivity`` are its command lines.

- :mod:`~gnnperf.gate.arms`: the arms and the worker processes that measure them.
- :mod:`~gnnperf.gate.worker`: one such worker (run by path, never imported).
- :mod:`~gnnperf.gate.work`: the exact work gate's comparison.
- :mod:`~gnnperf.gate.decision`: the time gate's statistics and decision rule.
- :mod:`~gnnperf.gate.compare`: one gate run (:class:`GateOptions`, :func:`run_gate`).
- :mod:`~gnnperf.gate.explain`: what moved, from a profile of each arm's step.
- :mod:`~gnnperf.gate.render`: what the gate prints, and its Markdown.
- :mod:`~gnnperf.gate.bisection`: ``gnnperf bisect``.
- :mod:`~gnnperf.gate.faults`: injected regressions, for showing the gate catches them.
- :mod:`~gnnperf.gate.sensitivity`: the time gate's false-alarm and detection rates.
- :mod:`~gnnperf.gate.cli`: the three command lines.
"""
from gnnperf.gate.arms import Arm, ArmProbe, checkout_top, copy_tree, export_ref, probe, run_arms, run_work
from gnnperf.gate.bisection import BisectResult, bisect, commits_between
from gnnperf.gate.compare import GateOptions, GateResult, compare_arms, run_gate, time_gate
from gnnperf.gate.decision import (TimeSamples, Verdict, adaptive_test, decide, inconclusive, judge,
                                   pair_log_ratios, pair_test)
from gnnperf.gate.render import format_time, format_work, markdown
from gnnperf.gate.work import compare_work

__all__ = ["Arm", "ArmProbe", "BisectResult", "GateOptions", "GateResult", "TimeSamples", "Verdict",
           "adaptive_test", "bisect", "checkout_top", "commits_between", "compare_arms",
           "compare_work", "copy_tree", "decide", "export_ref", "format_time", "format_work",
           "inconclusive", "judge", "markdown", "pair_log_ratios", "pair_test", "probe",
           "run_arms", "run_gate", "run_work", "time_gate"]
