"""``gnnperf history``'s report: the text it prints, the reviewer's
Markdown (an issue-ready section per confirmed regression, then a table)
and the ``--json`` document.
"""
from __future__ import annotations

import math
from typing import Sequence

from gnnperf.history.alerts import Alert, Gap, GateCase
from gnnperf.history.asv_results import Results, Series
from gnnperf.history.detect import Change

def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%" if math.isfinite(ratio) else "+inf"


def _date(results: Results, commit: str) -> str:
    import datetime
    ms = results.dates.get(commit)
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).date().isoformat() \
        if ms else "?"


def _where(results: Results, alert: Alert) -> str:
    n = len(results.commits)
    where = (f"{alert.commit[:10]} ({_date(results, alert.commit)}; "
             f"commit {alert.position + 1} of {n})")
    if alert.end_commit != alert.commit:
        span = results.commits.index(alert.end_commit) - alert.position + 1
        where = (f"{alert.commit[:10]}..{alert.end_commit[:10]} (a drift over {span} commits, "
                 f"{_date(results, alert.commit)} to {_date(results, alert.end_commit)}; "
                 f"commits {alert.position + 1}-{alert.position + span} of {n})")
    return where


def _size(change: Change) -> str:
    if change.ci_low == change.ci_high:
        return f"{_pct(change.ratio)} (exact)"
    return (f"{_pct(change.ratio)} [{_pct(change.ci_low)}, {_pct(change.ci_high)}] "
            f"p {change.pvalue:.1g}")


def verdict(alert: Alert, failing: list[Alert]) -> str:
    """An alert's word in the report: ``REGRESSION`` (it fails),
    ``unconfirmed`` (the gate did not see it), ``inconclusive`` (a rise past
    the threshold whose interval reaches no change), ``regression`` (one
    that does not fail: before ``--recent``), or ``change``.

    Args:
        alert: the alert.
        failing: the alerts that fail.

    Returns:
        The word.
    """
    if alert in failing:
        return "REGRESSION"
    if alert.confirmation is not None and alert.confirmation.state == "unconfirmed":
        return "unconfirmed"
    if alert.regression and not alert.conclusive:
        return "inconclusive"
    return "regression" if alert.regression else "change"


def _reading(r: GateCase) -> str:
    if r.ratio is None:
        time = r.verdict
    else:
        time = (f"time ratio {r.ratio:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] p "
                f"{r.p_slower:.2g}, {r.pairs} pairs: {r.verdict}")
    work = "; work metrics changed: " + ", ".join(f"{m} {a} -> {b}" for m, a, b in r.work) \
        if r.work else ""
    ops = "; ATen ops changed: " + ", ".join(f"{op} {a} -> {b}" for op, a, b in r.ops) \
        if r.ops else ""
    return f"{r.case}: {time}{work}{ops}"


def _gap_line(results: Results, gap: Gap) -> str:
    n = len(results.commits)
    rank = {c: i for i, c in enumerate(results.commits)}
    at = ", ".join(f"{c[:10]} (commit {rank[c] + 1} of {n})" for c in gap.commits[:5]) \
        + (f" and {len(gap.commits) - 5} more" if len(gap.commits) > 5 else "")
    why = ("the benchmark raised (the history figure's environment guard names a background "
           "thread or a global mode it found) or its environment did not build: asv run "
           "--show-stderr at one of them says which")
    if gap.current:
        return (f"FAILED: {gap.series.name} has no value at its newest commits: asv recorded "
                f"a failure at {at}, and no value after ({why})")
    return f"gap: {gap.series.name}: asv recorded a failure at {at} ({why})"


def _summary(failing: list[Alert], gaps: list[Gap], threshold: float) -> str:
    n_reg, n_gap = len(failing), sum(g.current for g in gaps)
    parts = [f"{n_reg} regression{'s' if n_reg != 1 else ''} past {threshold:+.0%}"
             if n_reg else f"no regression past {threshold:+.0%}"]
    if n_gap:
        parts.append(f"{n_gap} series failing at {'its' if n_gap == 1 else 'their'} newest "
                     f"commits")
    return "; ".join(parts)


def format_text(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
                header: str, failing: list[Alert], threshold: float,
                gaps: Sequence[Gap] = ()) -> str:
    """What ``gnnperf history`` prints: one block per commit where something
    changed, the series in it largest change first, then the gate's word on
    it (``--confirm``); then the gaps.

    Args:
        results: the results the alerts were found in.
        alerts: every alert, oldest first (:func:`~gnnperf.history.alerts.analyse`).
        short: the series not judged, each with why.
        header: the report's first line (machine, order, pattern, detector).
        failing: the alerts that fail.
        threshold: the regression threshold, for the summary line.
        gaps: the gaps (:func:`~gnnperf.history.alerts.find_gaps`).

    Returns:
        The text, without a final newline.
    """
    lines = [header]
    for a in alerts:
        label = verdict(a, failing)
        lines.append(f"{label} at {_where(results, a)}")
        for m in a.moved:
            lines.append(f"  {_size(m.change)}  {m.series.name}  "
                         f"{m.change.before:.4g} -> {m.change.after:.4g}")
        for name, before, after, at in a.work:
            lines.append(f"  work metric moved: {name} {before:.6g} -> {after:.6g} at {at[:10]}")
        if a.regression and not a.conclusive:
            lines.append("  inconclusive: its 95% interval reaches no change (1.0); not a "
                         "failing regression (gnnperf gate on the commit, or more commits "
                         "after it, decide it)")
        c = a.confirmation
        if c is not None:
            where = (f"at {c.culprit[:10]} \"{c.subject}\" against {c.base[:10]}" if c.culprit
                     else f"across {c.base[:10]}..{c.head[:10]}" if c.base else "")
            state = {"error": "not checked"}.get(c.state, c.state)
            lines.append(f"  {state} by the gate{' ' + where if where else ''}: {c.note}")
            for r in c.cases:
                lines.append(f"    {_reading(r)}")
            if c.command:
                lines.append(f"    reproduce: {c.command}")
            if c.search:
                lines.append(f"    found by: {c.search}")
    for gap in gaps:
        lines.append(_gap_line(results, gap))
    for s, why in short:
        lines.append(f"not judged: {s.name} ({why})")
    lines.append(_summary(failing, list(gaps), threshold))
    return "\n".join(lines)


def format_issue(results: Results, alert: Alert) -> str:
    """An issue's Markdown for one confirmed alert: the culprit, the gate's
    ratio and interval, the ops that changed, the command that reproduces it.

    Args:
        results: the results the alert was found in.
        alert: an alert the gate confirmed.

    Returns:
        The Markdown section.
    """
    c = alert.confirmation
    top = alert.moved[0]
    title = (f"{_pct(top.change.ratio)} at `{c.culprit[:10]}` {c.subject}" if c.culprit
             else f"{_pct(top.change.ratio)} over `{c.base[:10]}..{c.head[:10]}` (a drift)")
    lines = [f"### Confirmed regression: {title}", ""]
    if c.culprit:
        lines.append(f"* **Culprit**: `{c.culprit}` {c.subject} (parent `{c.base}`)")
    else:
        lines.append(f"* **Span**: `{c.base}`..`{c.head}`, no one commit carries it alone")
    lines.append(f"* **History**: `{top.series.name}` {_size(top.change)}, "
                 f"{top.change.before:.4g} &rarr; {top.change.after:.4g} at "
                 f"{_where(results, alert)}")
    for r in c.cases:
        if r.ratio is not None:
            lines.append(f"* **Gate** `{r.case}`: time ratio {r.ratio:.3f}, 95% interval "
                         f"[{r.ci_low:.3f}, {r.ci_high:.3f}], p {r.p_slower:.2g} "
                         f"({r.pairs} process pairs): {r.verdict}")
        else:
            lines.append(f"* **Gate** `{r.case}`: {r.verdict}")
        if r.work:
            lines.append("* **Work metrics changed**: " + ", ".join(
                f"`{m}` {a} &rarr; {b}" for m, a, b in r.work))
        if r.ops:
            lines.append("* **ATen ops changed**: " + ", ".join(
                f"`{op}` {a} &rarr; {b}" for op, a, b in r.ops))
    lines += ["* **Reproduce**:", "", "  ```bash", f"  {c.command}", "  ```"]
    if c.search:
        lines += ["", f"  Found by `{c.search}`."]
    return "\n".join(lines) + "\n"


def format_markdown(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
                    header: str, failing: list[Alert], threshold: float,
                    gaps: Sequence[Gap] = ()) -> str:
    """The reviewer's Markdown: with ``--confirm``, an issue-ready section
    per confirmed alert (:func:`format_issue`) first; then a table row per
    series that moved, grouped by commit, and the gaps.

    Args:
        results, alerts, short, header, failing, threshold, gaps: as
            :func:`format_text` takes them.

    Returns:
        The Markdown.
    """
    lines = ["### gnnperf history", "", header, ""]
    confirmed = [a for a in alerts if a.confirmation is not None and a.confirmation.confirmed]
    if any(a.confirmation is not None for a in alerts):
        lines += [format_issue(results, a) for a in confirmed] or \
            ["No alert was confirmed by the gate.", ""]
    if alerts:
        lines += ["| commit | verdict | series | change [95% interval] | before &rarr; after | "
                  "work metrics moved |", "|---|---|---|---|---|---|"]
    for a in alerts:
        label = verdict(a, failing)
        label = f"**{label}**" if label == "REGRESSION" else label
        work = "<br>".join(f"`{n}` {b:.6g}&rarr;{f:.6g}" for n, b, f, _ in a.work) or ""
        for i, m in enumerate(a.moved):
            lines.append(f"| {'`' + _where(results, a) + '`' if i == 0 else ''} | "
                         f"{label if i == 0 else ''} | `{m.series.name}` | {_size(m.change)} | "
                         f"{m.change.before:.4g} &rarr; {m.change.after:.4g} | "
                         f"{work if i == 0 else ''} |")
    for gap in gaps:
        lines.append(f"\n{_gap_line(results, gap)}")
    for s, why in short:
        lines.append(f"\nNot judged: `{s.name}` ({why})")
    lines.append("")
    summary = _summary(failing, list(gaps), threshold)
    lines.append(f"**{summary}**" if failing or any(g.current for g in gaps)
                 else f"{summary[0].upper()}{summary[1:]}.")
    return "\n".join(lines) + "\n"


def to_dict(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
            failing: list[Alert], settings: dict, gaps: Sequence[Gap] = ()) -> dict:
    """The ``--json`` document.

    Args:
        results: the results the alerts were found in.
        alerts: every alert, oldest first.
        short: the series not judged, each with why.
        failing: the alerts that fail.
        settings: the command's settings, recorded as they are.
        gaps: the gaps.

    Returns:
        The document, JSON-ready (a non-finite ratio as ``None``).
    """
    from dataclasses import asdict

    def finite(x: float) -> float | None:
        return x if math.isfinite(x) else None
    return {
        "machine": results.machine, "order": results.order, "commits": len(results.commits),
        "dropped_for_version": results.dropped, **settings,
        "changes": [{
            "commit": a.commit, "end_commit": a.end_commit, "position": a.position,
            "date": _date(results, a.commit), "regression": a.regression,
            "conclusive": a.conclusive, "verdict": verdict(a, failing),
            "fails": a in failing,
            "series": [{"name": m.series.name, "benchmark": m.series.benchmark,
                        "params": m.series.params, "ratio": finite(m.change.ratio),
                        "ci_low": finite(m.change.ci_low), "ci_high": finite(m.change.ci_high),
                        "pvalue": m.change.pvalue, "before": m.change.before,
                        "after": m.change.after, "regression": m.regression,
                        "conclusive": m.conclusive,
                        "steps": [m.series.commits[i] for i in m.change.steps]}
                       for m in a.moved],
            "work": [{"name": n, "before": b, "after": f, "commit": c} for n, b, f, c in a.work],
            "confirmation": asdict(a.confirmation) if a.confirmation is not None else None,
        } for a in alerts],
        "gaps": [{"name": g.series.name, "failed": g.commits, "current": g.current}
                 for g in gaps],
        "too_short": [{"name": s.name, "points": len(s.values), "why": why} for s, why in short],
        "regressions": len(failing),
    }


__all__ = ["format_issue", "format_markdown", "format_text", "to_dict", "verdict"]
