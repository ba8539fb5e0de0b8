"""The history wing: change points across a benchmark's history, the
regressions that creep in over many commits (each too small for the gate's
one-commit comparison) and the steps that landed unnoticed.

- :mod:`gnnperf.history.asv_results`: the one reader of asv's results
  folder (machines, parameter names, result files, the series in commit
  order); stdlib only.
- :mod:`gnnperf.history.detect`: the change-point detectors and the changes
  they find in one series (a drift over a few commits merged into one).
- :mod:`gnnperf.history.alerts`: the series a pattern selects, their
  changes gathered commit by commit with the work metrics that moved, and
  the gaps where asv recorded a failure.
- :mod:`gnnperf.history.confirm`: the gate at an alert's commit
  (``--confirm``).
- :mod:`gnnperf.history.render`: the text, Markdown and JSON reports.
- :mod:`gnnperf.history.cli`: ``gnnperf history``.

Importing the package loads no numerical library: each detector and the
gate load on first use.
"""
from gnnperf.history.alerts import (DEFAULT_BENCH, DEFAULT_METHOD, Alert, Confirmation, GateCase,
                                    Gap, Moved, analyse, exact_changes, find_gaps, select)
from gnnperf.history.asv_results import Results, Series, read_asv_results
from gnnperf.history.cli import add_parser, history_command
from gnnperf.history.confirm import ConfirmOptions, check_repository, confirm_alert
from gnnperf.history.detect import (DETECTORS, MERGE_WITHIN, MIN_POINTS, Change, HistoryTooShort,
                                    NotJudged, describe, detect_asv, detect_otava,
                                    detect_ruptures, find_changes, robust_sigma, segment_test)
from gnnperf.history.render import format_issue, format_markdown, format_text, to_dict, verdict

__all__ = ["Alert", "Change", "ConfirmOptions", "Confirmation", "DEFAULT_BENCH", "DEFAULT_METHOD",
           "DETECTORS", "GateCase", "Gap", "HistoryTooShort", "MERGE_WITHIN", "MIN_POINTS",
           "Moved", "NotJudged", "Results", "Series", "add_parser", "analyse",
           "check_repository", "confirm_alert", "describe", "detect_asv", "detect_otava",
           "detect_ruptures", "exact_changes", "find_changes", "find_gaps", "format_issue",
           "format_markdown", "format_text", "history_command", "read_asv_results",
           "robust_sigma", "segment_test", "select", "to_dict", "verdict"]
