"""What the gate prints, and the Markdown a reviewer reads (``--markdown``,
the workflows' step summary)."""
from __future__ import annotations

from gnnperf.gate.decision import Verdict
from gnnperf.gate.work import op_delta


def format_work(rows: list[dict]) -> str:
    lines = [f"{'benchmark':30} {'metric':16} {'base':>14} {'head':>14}  verdict"]
    for row in rows:
        if "op_diff" in row:
            lines.append(f"{row['case']:30} {'ops changed':16} {_signed_ops(row)}")
            continue
        if row["base"] is None and row["head"] is None:
            continue
        verdict = "same" if row["same"] else "new" if row.get("new") else "CHANGED"
        lines.append(f"{row['case']:30} {row['metric']:16} {_fmt(row['base']):>14} "
                     f"{_fmt(row['head']):>14}  {verdict}")
    return "\n".join(lines)


def _signed_ops(row: dict, markdown: bool = False) -> str:
    """The calls per step an op-count row's operators gained and lost, the
    largest change first: ``+1 aten.add 5->6, -1 aten.addmm 2->1``."""
    diff = row["op_diff"]
    arrow = "&rarr;" if markdown else "->"
    return ", ".join(f"{delta:+d} {f'`{op}`' if markdown else op} {diff[op][0]}{arrow}{diff[op][1]}"
                     for op, delta in op_delta(diff).items())


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
            return _signed_ops(row, markdown=True)
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
    operators whose counts changed (signed, per step); then the settings and,
    where the gate explained a change, what moved (:func:`markdown_explain`)."""
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
    if "explain" in report:
        lines += markdown_explain(report["explain"])
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- what moved
def _ratio(value) -> str:
    return "new" if value is None else f"x{value:.3f}"


def _calls(row: dict) -> str:
    a, b = row["base_calls"], row["head_calls"]
    return f"{a:g}" if a == b else f"{a:g}->{b:g}"


def _agree(row: dict) -> str:
    return f"{row['agree']}/{row['rounds']}" if "agree" in row else "-"


def _op_table(rows: list[dict], indent: str = "  ") -> list[str]:
    lines = [f"{indent}{'op':50} {'base us':>10} {'head us':>10} {'change':>10} {'ratio':>7} "
             f"{'rounds':>6}  calls"]
    for r in rows:
        lines.append(f"{indent}{r['op']:50} {r['base_us']:10.1f} {r['head_us']:10.1f} "
                     f"{r['delta_us']:+10.1f} {_ratio(r['ratio']):>7} {_agree(r):>6}  {_calls(r)}")
    return lines


def _consistent(section: dict) -> str:
    k, n = section.get("consistent_from"), section["rounds"]
    if k is None:
        return "half of them by chance"
    if k > n:
        return "too few rounds to tell a change from chance"
    return f"{k}/{n} or more: a change that chance gives under 1 time in 100"


def _step_us(profile: dict) -> float:
    return profile.get("cpu_us", profile["wall_us"])


def _step(arms: dict) -> str:
    """The profiled step's paired change (``x1.040 in 14/15 rounds``)."""
    step = arms.get("step")
    if step is None:
        return f"x{_step_us(arms['head']) / _step_us(arms['base']):.3f}"
    return f"x{step['ratio']:.3f} in {step['agree']}/{step['rounds']} rounds"


def shift_line(shift: dict) -> list[str]:
    """The common-or-particular verdict (:func:`gnnperf.gate.explain.group_ratios`)
    in words, a line per group."""
    kind = shift["shift"]
    if kind == "none":
        return ["shift across cases: no timed case to compare"]
    groups = shift["groups"]
    fits_all = shift.get("p_common") is not None and shift["p_common"] >= shift.get("alpha", 0.01)
    head = {"one case": "one timed case: nothing to compare it with",
            "common": f"common to all {len(groups[0]['cases'])} timed cases ("
                      + ("one factor fits them all" if fits_all else
                         f"alike within {shift.get('tolerance', 0.01):.0%}, though their "
                         f"intervals tell them apart") + ")",
            "particular": f"particular to cases: {len(groups)} groups"}[kind]
    lines = [f"shift across cases: {head}"]
    for g in groups:
        lines.append(f"  x{g['ratio']:.3f} [{g['ci_low']:.3f}, {g['ci_high']:.3f}]: "
                     + ", ".join(g["cases"]))
    fits = []
    if shift.get("p_common") is not None and sum(len(g["cases"]) for g in groups) > 1:
        fits.append(f"one common factor: p {shift['p_common']:.2g} "
                    f"({'fits' if fits_all else 'does not fit'})")
    per_op = shift.get("per_op")
    if per_op:
        fits.append(f"one cost per ATen op: {per_op['ns_per_op']:+.0f} ns "
                    f"[{per_op['ci_low']:+.0f}, {per_op['ci_high']:+.0f}], p {per_op['p']:.2g} "
                    f"({'fits' if per_op['fits'] else 'does not fit'})")
    if fits:
        lines.append("  single cause? " + "; ".join(fits))
    return lines


_OVERHEAD_ROWS = (("add_ns", "torch.add, 1 element"), ("empty_ns", "torch.empty(0)"),
                  ("add_grad_ns", "torch.add, autograd"))


def format_explain(section: dict) -> str:
    """The explanation's text (:func:`gnnperf.gate.explain.explain`)."""
    if "error" in section:
        return f"== what moved: not explained ({section['error']})"
    lines = [f"== what moved (torch.profiler CPU self time per op, us per step, median of "
             f"{section['rounds']} profiles in each arm's own environment; rounds: the "
             f"profile pairs that moved the same way, {_consistent(section)})"]
    timed = {row["case"]: row for row in section["per_case"]}
    for case in section["cases"]:
        base, head = (section["profiles"][case][arm] for arm in ("base", "head"))
        t = timed.get(case)
        gate = (f"; timed x{t['ratio']:.3f} [{t['ci_low']:.3f}, {t['ci_high']:.3f}]"
                if t else "")
        lines.append(f"{case}: profiled step {_step_us(base):,.0f} -> {_step_us(head):,.0f} us "
                     f"CPU ({_step(section['profiles'][case])}){gate}")
        lines += _op_table(section["ops"][case])
    if section.get("all_cases"):
        lines.append(f"all {len(section['cases'])} profiled cases, one step of each summed:")
        lines += _op_table(section["all_cases"])
    for case, reason in section.get("failed", {}).items():
        lines.append(f"{case}: not profiled ({reason})")
    lines += shift_line(section["shift"])
    over = section["overhead"]
    lines.append(f"per-op overhead, median ns per call ({over['base']['threads']} thread(s)): "
                 f"base torch {over['base']['torch']}, head torch {over['head']['torch']}")
    for key, label in _OVERHEAD_ROWS:
        a, b = over["base"][key], over["head"][key]
        change = over.get("change", {}).get(key, b - a)
        lines.append(f"  {label:24} {a:8,.0f} -> {b:8,.0f}  (paired change {change:+,.0f}, "
                     f"x{(a + change) / a:.3f})")
    moved = over.get("change", {}).get("add_ns", over["head"]["add_ns"] - over["base"]["add_ns"])
    shares = [row for row in section["per_case"] if row["aten_ops"]]
    if shares:
        lines.append(f"  {moved:+,.0f} ns per op x each case's ATen ops per step, beside its "
                     f"timed change:")
        for row in shares:
            lines.append(f"  {row['case']:40} {row['aten_ops']:6,} ops "
                         f"{row['overhead_us']:+9.1f} us of {row['delta_us']:+9.1f} us")
    return "\n".join(lines)


def markdown_explain(section: dict) -> list[str]:
    """The explanation as Markdown lines, after the gate's table."""
    if "error" in section:
        return ["", f"What moved: not explained ({section['error']})"]
    lines = ["", "#### What moved", "",
             f"CPU self time per op (torch.profiler), us per step, median of "
             f"{section['rounds']} profiles of each arm's step in its own environment; "
             f"rounds: the profile pairs that moved the same way, {_consistent(section)}."]
    for case in section["cases"]:
        base, head = (section["profiles"][case][arm] for arm in ("base", "head"))
        lines += ["", f"**{case}**: profiled step {_step_us(base):,.0f} &rarr; "
                      f"{_step_us(head):,.0f} us CPU ({_step(section['profiles'][case])})", "",
                  "| op | base us | head us | change | ratio | rounds | calls |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| `{r['op']}` | {r['base_us']:.1f} | {r['head_us']:.1f} | {r['delta_us']:+.1f} "
                  f"| {_ratio(r['ratio'])} | {_agree(r)} | {_calls(r).replace('->', '&rarr;')} |"
                  for r in section["ops"][case]]
    shift = shift_line(section["shift"])
    lines += ["", shift[0], ""] + [f"- {line.strip()}" for line in shift[1:]]
    over = section["overhead"]
    lines += ["", f"Per-op overhead, median ns per call: base torch {over['base']['torch']}, head "
                  f"torch {over['head']['torch']}", "",
              "| op | base ns | head ns | paired change |", "|---|---:|---:|---:|"]
    for key, label in _OVERHEAD_ROWS:
        a, b = over["base"][key], over["head"][key]
        lines.append(f"| {label} | {a:,.0f} | {b:,.0f} | "
                     f"{over.get('change', {}).get(key, b - a):+,.0f} |")
    return lines
