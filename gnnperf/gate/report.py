"""What the gate prints, and the Markdown a reviewer reads (``--markdown``,
the workflows' step summary)."""
from __future__ import annotations

from gnnperf.gate.stats import Verdict


def format_work(rows: list[dict]) -> str:
    lines = [f"{'benchmark':30} {'metric':16} {'base':>14} {'head':>14}  verdict"]
    for row in rows:
        if "op_diff" in row:
            changes = ", ".join(f"{op} {a}->{b}" for op, (a, b) in row["op_diff"].items())
            lines.append(f"{row['case']:30} {'ops changed':16} {changes}")
            continue
        if row["base"] is None and row["head"] is None:
            continue
        verdict = "same" if row["same"] else "new" if row.get("new") else "CHANGED"
        lines.append(f"{row['case']:30} {row['metric']:16} {_fmt(row['base']):>14} "
                     f"{_fmt(row['head']):>14}  {verdict}")
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def format_time(verdicts: list[Verdict], threshold: float, alpha: float) -> str:
    """The time gate's table, one line per benchmark."""
    lines = [f"{'benchmark':30} {'base ms':>9} {'spread':>7} {'head ms':>9} {'spread':>7} "
             f"{'ratio':>7} {'95% CI':>15} {'p':>7} {'pairs':>5}  verdict"]
    for v in verdicts:
        p = v.p_faster if v.ratio < 1 else v.p_slower
        lines.append(f"{v.case:30} {v.base_median_s * 1e3:9.3f} {v.base_spread:7.1%} "
                     f"{v.head_median_s * 1e3:9.3f} {v.head_spread:7.1%} {v.ratio:7.3f} "
                     f"[{v.ci_low:.3f},{v.ci_high:.3f}] {p:7.4f} {v.pairs:5d}  {v.verdict}")
    lines.append(f"(regression: ratio > {1 + threshold:.3f} and one-sided t-test across process "
                 f"pairs p < {alpha}; an inconclusive verdict got more pairs; "
                 f"spread = IQR/median of the per-step samples)")
    return "\n".join(lines)


def _op_changes(rows: list[dict], case: str) -> str:
    for row in rows:
        if row["case"] == case and "op_diff" in row:
            return ", ".join(f"`{op}` {a}&rarr;{b}" for op, (a, b) in row["op_diff"].items())
    return ""


def _work_verdict(rows: list[dict], case: str) -> str:
    mine = [row for row in rows if row["case"] == case and "op_diff" not in row]
    if not mine:
        return "not measured"
    if any(row.get("new") for row in mine):
        return "new benchmark"
    changed = [row["metric"] for row in mine if not row["same"]]
    return "**changed**: " + ", ".join(changed) if changed else "same"


def _arm_line(arm) -> str:
    if isinstance(arm, str):
        return f"`{arm}`"
    state = "" if arm.get("dirty") is None else " (dirty)" if arm["dirty"] else " (clean)"
    label = f"{arm['label']} " if arm.get("label") else ""
    # A model repository's commit: gnnperf is the same in both arms.
    fixed = f"gnnperf {arm['gnnperf']} (fixed), " if arm.get("gnnperf_fixed") else ""
    return (f"{label}`{arm['tree']}` at `{(arm.get('commit') or 'no commit')[:12]}`{state}, "
            f"{fixed}Python {arm['python']}, torch {arm['torch']}, torch_geometric "
            f"{arm['torch_geometric']}")


def _status(report: dict, case: str) -> str:
    """What happened to a case that has no time verdict, if not plain absence."""
    if case in report.get("head_failed", {}):
        return f"**FAILED** in the head: {report['head_failed'][case]}"
    if case in report.get("removed", []):
        return "**FAILED**: removed from the head"
    if case in report.get("new", []):
        return "new in the head"
    if case in report.get("unavailable", {}):
        return f"n/a ({report['unavailable'][case]})"
    if case in report.get("base_failed", {}):
        return f"not compared: the base failed ({report['base_failed'][case]})"
    return ""


def markdown(report: dict) -> str:
    """One table row per benchmark: base and head step time, the ratio with
    its 95% interval, the p-value, the time verdict, the work verdict and the
    operators whose counts changed; then the settings."""
    settings = report["settings"]
    verdicts = {v["case"]: v for v in report.get("time", {}).get("verdicts", [])}
    rows = report.get("work", {}).get("rows", [])
    failed = report.get("failed")
    lines = [f"### gnnperf gate: {'FAILED' if failed else 'passed'}", ""]
    lines += [f"{name}: {_arm_line(arm)}  " for name, arm in report["arms"].items()]
    lines += ["", "| benchmark | base ms | head ms | ratio [95% CI] | p | pairs | time | work "
                  "| ops changed |",
              "|---|---:|---:|---|---:|---:|---|---|---|"]
    for case in report["cases"]:
        v = verdicts.get(case)
        if v is not None:
            p = v["p_faster"] if v["ratio"] < 1 else v["p_slower"]
            verdict = f"**{v['verdict']}**" if v["verdict"] == "REGRESSION" else v["verdict"]
            timing = (f"{v['base_median_s'] * 1e3:.3f} | {v['head_median_s'] * 1e3:.3f} | "
                      f"{v['ratio']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}] | {p:.4f} | "
                      f"{v.get('pairs', '-')} | {verdict}")
        else:
            timing = "- | - | - | - | - | " + (_status(report, case) or (
                "not timed" if "time" in report else "off"))
        work = _work_verdict(rows, case) if "work" in report else "off"
        lines.append(f"| {case} | {timing} | {work} | {_op_changes(rows, case)} |")
    lines += ["", f"Regression: ratio > {1 + settings['threshold']:.3f} and one-sided t-test "
              f"across {settings['processes']} process pairs p < {settings['alpha']} "
              f"({settings['rounds']} interleaved rounds each, {settings['clock']} clock); "
              f"work metrics must match exactly."]
    return "\n".join(lines) + "\n"
