"""What each torch_geometric and torch release did to GNN training on one
machine: the data of the record's "What each release did" (docs/results.md)
and the tables rendered from it.

    python tools/releases.py collect --gates DIR [--asv-results DIR]   # docs/data/releases.json
    python tools/figures.py                                           # the record's tables

``collect`` reads the JSON of each ``gnnperf gate`` between two releases
(``<series>-<base>-<head>.json`` in ``--gates``, series ``pyg`` or
``torch``; the command that wrote it in ``<name>.cmd``, its exit status in
``<name>.rc``) and asv's results over the release tags (the machine's folder
of an adopting repository's ``.gnnperf/.asv/results``). :data:`TABLES`
render the record's blocks ``<!-- figure:releases-NAME -->`` from that data
alone (tools/figures.py calls them).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data" / "releases.json"
SERIES = {"pyg": "torch_geometric", "torch": "torch"}
#: asv benchmarks the page tabulates, by the name asv gives them.
ASV_TIME = "training.TrainStep.time_train_step"
ASV_OPS = "work_metrics.WorkMetrics.track_aten_ops"


def _version_key(version: str):
    """A release's order: ``v`` prefixes and local parts (``+cu130``) aside,
    so a torch build and its plain version compare equal."""
    from packaging.version import InvalidVersion, Version
    try:
        return Version(version.lstrip("v").split("+")[0])
    except InvalidVersion:
        raise SystemExit(f"{version!r}: not a release version (name files by their versions)")


def _gate(path: Path) -> dict:
    doc = json.loads(path.read_text())
    series, base, head = path.stem.split("-")[:3]
    # ``<series>-<base>-<head>-repeat``: the same comparison run again, to
    # confirm what the first run found before the page says it.
    repeat = path.stem.endswith("-repeat")
    arms = doc["arms"]
    fixed = "torch" if series == "pyg" else "torch_geometric"
    if arms["base"][fixed] != arms["head"][fixed]:
        raise SystemExit(f"{path}: the arms differ in {fixed} too ({arms['base'][fixed]} vs "
                         f"{arms['head'][fixed]}): one release may change per comparison")
    cmd = path.with_suffix(".cmd")
    rc = path.with_suffix(".rc")
    start = path.with_suffix(".start")
    changed = [row for row in doc["work"]["rows"] if not row.get("same", True) and "op_diff" not in row]
    ops = {row["case"]: row["op_diff"] for row in doc["work"]["rows"] if "op_diff" in row}
    explain = doc.get("explain") or {}
    shift = (explain.get("shift") or {})
    return {
        "series": SERIES[series], "base": base, "head": head, "repeat": repeat,
        "base_version": arms["base"][SERIES[series]], "head_version": arms["head"][SERIES[series]],
        "fixed": f"{fixed} {arms['head'][fixed]}",
        "python": arms["head"]["python"], "gnnperf": arms["head"]["gnnperf"],
        "date": start.read_text().strip()[:10] if start.is_file() else None,
        "command": cmd.read_text().strip() if cmd.is_file() else None,
        "exit": int(rc.read_text()) if rc.is_file() else None,
        "settings": doc["settings"],
        "cases": [{k: v[k] for k in ("case", "ratio", "ci_low", "ci_high", "verdict", "pairs")}
                  for v in doc["time"]["verdicts"]],
        "work_changed": [{k: row[k] for k in ("case", "metric", "base", "head")} for row in changed],
        "ops_changed": ops,
        "failed": {"base": doc.get("base_failed") or {}, "head": doc.get("head_failed") or {}},
        "shift": ({k: shift[k] for k in ("shift", "groups", "p_common") if k in shift}
                  if shift else None),
        # The paired change of an op's fixed cost (ns per call, head minus base,
        # measured in alternation): an empty op and a one-element add. Dispatch's share.
        "op_cost_change_ns": ({k: (explain.get("overhead") or {})["change"][k]
                               for k in ("empty_ns", "add_ns")}
                              if (explain.get("overhead") or {}).get("change") else None),
        "top_ops": [{k: op[k] for k in ("op", "base_us", "head_us", "ratio", "agree", "rounds")}
                    for op in (explain.get("all_cases") or [])[:5]],
        # Per case the gate timed as changed: the ops whose self time moved the
        # same way in enough profile pairs (the gate's own rule), largest first.
        "case_ops": {case: [{k: op[k] for k in ("op", "delta_us", "ratio", "agree", "rounds")}
                            for op in ops_of_case
                            if op["agree"] >= explain.get("consistent_from", op["rounds"] + 1)][:3]
                     for case, ops_of_case in (explain.get("ops") or {}).items()},
    }


def _asv(results: Path, tags: dict[str, str]) -> dict:
    """Per tag: each variant's step time (ms) and ATen op count from asv's
    result files in one machine's folder (``tags``: tag -> full commit),
    read by gnnperf's one reader of asv's results."""
    from gnnperf.history.asv_results import combinations, result_files
    by_commit = {}
    for result in result_files(results):
        row = {}
        for name, key in ((ASV_TIME, "time_ms"), (ASV_OPS, "aten_ops")):
            if name not in result.rows:
                continue
            # params: dataset x variant (x model); one dataset and one model here,
            # so the first combinations are the variants'.
            variants = [axis.strip("'") for axis in result.rows[name]["params"][1]]
            values = [value for _, value in combinations(result.rows[name])]
            per_variant = {}
            for i, variant in enumerate(variants):
                value = values[i] if i < len(values) else None
                if value is not None and value == value and key == "time_ms":
                    value = round(value * 1e3, 3)
                per_variant[variant] = value if value == value else "n/a"
            row[key] = per_variant
            row["started"] = result.started_at
        by_commit[result.commit] = row
    return {"benchmarks": [ASV_TIME, ASV_OPS],
            "tags": [{"tag": tag, "commit": commit, **by_commit.get(commit, {})}
                     for tag, commit in sorted(tags.items(), key=lambda t: _version_key(t[0]))]}


_FOUND = re.compile(r"^first changed commit: (?P<commit>[0-9a-f]+) (?P<subject>.*)$", re.M)
_MOVED = re.compile(r"^(?P<metric>[a-z_]+): (?P<before>[\d.,]+)(?P<unit> ms)? -> "
                    r"(?P<after>[\d.,]+)(?: ms)?(?P<state>.*)$", re.M)
_MEASURED = re.compile(r"^(?P<n>\d+) measurements in (?P<s>[\d.]+) s$", re.M)


def _bisect(path: Path) -> dict:
    """``bisect-<series>-<good>-<bad>[-<what>].txt``: what ``gnnperf bisect``
    printed (its command in ``.cmd``)."""
    series, good, bad = path.stem.split("-")[1:4]
    text = path.read_text()
    if not path.with_suffix(".cmd").is_file():
        raise SystemExit(f"{path.with_suffix('.cmd')}: the bisect's command is missing")
    found, moved, measured = _FOUND.search(text), _MOVED.search(text), _MEASURED.search(text)
    if not (found and moved):
        raise SystemExit(f"{path}: no 'first changed commit' and metric line: did the bisect finish?")
    return {"series": SERIES[series], "good": good, "bad": bad,
            "commit": found["commit"], "subject": found["subject"].strip(),
            "case": re.search(r"--case (\S+)", path.with_suffix(".cmd").read_text())[1],
            "metric": moved["metric"], "before": moved["before"] + (moved["unit"] or ""),
            "after": moved["after"] + (moved["unit"] or ""),
            "confirmed": "NOT confirmed" not in moved["state"],
            "measurements": int(measured["n"]) if measured else None,
            "seconds": float(measured["s"]) if measured else None,
            "command": path.with_suffix(".cmd").read_text().strip()}


def _this_machine() -> dict:
    """The machine ``collect`` runs on, where the gates and asv ran: the
    fields of gnnperf's own environment fingerprint that name it."""
    import torch

    from gnnperf.fingerprint import environment
    env = environment(seed=0, device=torch.device("cpu"))
    return {"cpu": env["device_name"], "cores": env["cpu_count"], "os": env["platform"],
            "python": env["python"]}


def collect(gates: Path, asv_results: Path | None, tags: dict[str, str], out: Path) -> dict:
    from gnnperf.errors import GnnperfError
    from gnnperf.history.asv_results import machine_name
    found = sorted((p for p in gates.glob("*-*-*.json") if p.stem.split("-")[0] in SERIES),
                   key=lambda p: (p.stem.split("-")[0], _version_key(p.stem.split("-")[1]),
                                  p.stem.endswith("-repeat")))
    data = {"gates": [_gate(p) for p in found],
            "bisects": [_bisect(p) for p in sorted(gates.glob("bisect-*-*-*.txt"))]}
    if asv_results is not None:
        try:
            data["asv"] = {**_asv(asv_results, tags), "machine": machine_name(asv_results)}
        except GnnperfError as exc:  # a folder that is not a machine's of asv's results
            raise SystemExit(f"--asv-results: {exc}") from None
    data["machine"] = _this_machine()
    out.write_text(json.dumps(data, indent=1) + "\n")
    return data


# --- the page -------------------------------------------------------------------------------

def _ratio(case: dict) -> str:
    return f"{case['ratio']:.3f} [{case['ci_low']:.3f}, {case['ci_high']:.3f}]"


def _gates_table(data: dict, series: str) -> list[str]:
    lines = ["| from | to | held fixed | exit | slower | faster | inconclusive | same | work changed | what moved: step-time ratio, 95% interval |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for gate in data["gates"]:
        if gate["series"] != series:
            continue
        count = {v: sum(c["verdict"] == v for c in gate["cases"])
                 for v in ("REGRESSION", "improvement", "inconclusive", "same")}
        moved = [f"{c['case']} {c['verdict']} {_ratio(c)}" for c in gate["cases"]
                 if c["verdict"] != "same"]
        changed_cases = {w["case"] for w in gate["work_changed"]}
        metrics = sorted({w["metric"] for w in gate["work_changed"]})
        work = ([f"{', '.join(metrics)} in {len(changed_cases)} of {len(gate['cases'])} cases"]
                if changed_cases else [])
        failed = sorted(set(gate["failed"]["base"]) | set(gate["failed"]["head"]))
        note = "; ".join(moved) or "none"
        if failed:
            note += "; failed in an arm: " + ", ".join(failed)
        again = " (repeated)" if gate.get("repeat") else ""
        lines.append(f"| {gate['base_version']} | {gate['head_version']}{again} | {gate['fixed']} | "
                     f"{gate['exit']} | {count['REGRESSION']} | {count['improvement']} | "
                     f"{count['inconclusive']} | {count['same']} | {', '.join(work) or 'none'} | "
                     f"{note} |")
    return lines


def _asv_grid(data: dict, key: str) -> list[str]:
    """One row per release tag, one column per variant: asv's ``key``
    figure (``time_ms`` or ``aten_ops``), "failed" where asv has none."""
    tags = [tag for tag in (data.get("asv") or {}).get("tags", []) if tag.get(key)]
    if not tags:
        return [f"(no asv {key} collected)"]
    variants = list(dict.fromkeys(v for tag in tags for v in tag[key]))

    def cell(value) -> str:
        return ("failed" if value is None else value if isinstance(value, str)
                else f"{value:.2f}" if isinstance(value, float) else str(value))
    lines = ["| release | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    lines += [f"| {tag['tag']} | " + " | ".join(cell(tag[key].get(v)) for v in variants) + " |"
              for tag in tags]
    return lines


def _findings(data: dict) -> list[str]:
    """Per comparison that moved anything: the ops a step gained or lost,
    each case whose time changed with the ops whose self time moved most,
    how the cases group, what failed, and the commit a bisect found."""
    lines = []
    for gate in data["gates"]:
        items = []
        ops = sorted({diff_text(d) for d in gate["ops_changed"].values()})
        if ops:
            cases = len(gate["ops_changed"])
            items.append(f"ATen ops per step, {cases} of {len(gate['cases'])} cases: " + "; ".join(ops))
        for case in gate["cases"]:
            if case["verdict"] != "same":
                moved = gate.get("case_ops", {}).get(case["case"])
                ops = ("; the ops that moved in the profiles: " + ", ".join(
                    f"{op['op']} {op['delta_us']:+.0f} us x{op['ratio']:.2f} "
                    f"({op['agree']}/{op['rounds']} rounds)" for op in moved)
                    if moved else "; no op moved consistently in the profiles"
                    if moved is not None else "")
                items.append(f"{case['case']}: {case['verdict']} {_ratio(case)} "
                             f"({case['pairs']} pairs){ops}")
        shift = gate.get("shift")
        if (shift and sum(len(g["cases"]) for g in shift.get("groups", [])) > 1
                and any(c["verdict"] != "same" for c in gate["cases"])):
            groups = "; ".join(f"{g['ratio']:.3f} for " + (", ".join(sorted(g["cases"]))
                                                           if len(g["cases"]) <= 4 else
                                                           f"{len(g['cases'])} other cases")
                               for g in sorted(shift["groups"], key=lambda g: len(g["cases"])))
            items.append(f"the shift is {shift['shift']} to the cases: {groups}")
        cost = gate.get("op_cost_change_ns")
        if cost and any(c["verdict"] != "same" for c in gate["cases"]):
            items.append(f"an op's fixed cost, paired change per call: empty op "
                         f"{cost['empty_ns']:+.0f} ns, one-element add {cost['add_ns']:+.0f} ns")
        for arm in ("base", "head"):
            for case, why in sorted(gate["failed"][arm].items()):
                items.append(f"{case} fails in the {arm} arm: {why}")
        for bisect in data.get("bisects", []):
            if (bisect["series"] == gate["series"] and _version_key(gate["base_version"])
                    <= _version_key(bisect["good"]) and _version_key(bisect["bad"])
                    <= _version_key(gate["head_version"])):
                items.append(f"{bisect['case']} {bisect['metric']} {bisect['before']} -> "
                             f"{bisect['after']} from commit {bisect['commit']} "
                             f"\"{bisect['subject']}\""
                             + ("" if bisect["confirmed"] else " (not confirmed)") + " "
                             f"(bisected {bisect['good']}..{bisect['bad']}, "
                             f"{bisect['measurements']} measurements)")
        if items:
            again = ", repeated" if gate.get("repeat") else ""
            lines.append(f"**{gate['series']} {gate['base_version']} -> {gate['head_version']}** "
                         f"({gate['fixed']} fixed{again}):")
            lines.append("")
            lines += [f"- {item}" for item in items]
            lines.append("")
    return lines[:-1] if lines else ["Nothing moved in any comparison."]


def diff_text(diff: dict) -> str:
    return ", ".join(f"{b - a:+d} {op} {a}->{b}" for op, (a, b) in sorted(diff.items()) if a != b)


def _report(data: dict) -> list[str]:
    """Each bisected change as an issue for the upstream project."""
    lines = []
    for bisect in data.get("bisects", []):
        gate = next((g for g in data["gates"] if g["series"] == bisect["series"]
                     and _version_key(g["base_version"]) <= _version_key(bisect["good"])
                     and _version_key(bisect["bad"]) <= _version_key(g["head_version"])), None)
        what = ("changes the work of" if bisect["metric"] != "time" else "slows")
        lines += [f"**{bisect['series']}: \"{bisect['subject']}\" ({bisect['commit']}) {what} a "
                  f"GCN training step (`{bisect['case']}`)**", ""]
        exact = ("exact, the same on every run" if bisect["metric"] != "time" else
                 "interleaved and t-tested at each step of the search, "
                 + ("confirmed against the commit's parent" if bisect["confirmed"]
                    else "NOT confirmed against the commit's parent"))
        lines.append(f"- Measured: one training step of gnnperf's `{bisect['case']}` (a two-layer "
                     f"GCN), CPU, one thread; {bisect['metric']} {bisect['before']} -> "
                     f"{bisect['after']} per step ({exact}).")
        if gate:
            timed = next((c for c in gate["cases"] if c["case"] == bisect["case"]), None)
            if bisect["metric"] != "time":
                ops = sorted({diff_text(d) for d in gate["ops_changed"].values()})
                lines.append(f"- Between the releases ({gate['base_version']} -> "
                             f"{gate['head_version']}, {gate['fixed']}): " + "; ".join(ops)
                             + f" per step, in {len(gate['ops_changed'])} of "
                             f"{len(gate['cases'])} cases.")
            if timed:
                lines.append(f"- The time gate on `{bisect['case']}` between the releases: "
                             f"{timed['verdict']}, ratio {_ratio(timed)}.")
            moved = gate.get("case_ops", {}).get(bisect["case"])
            if moved:
                lines.append("- Ops whose self time moved in its profiles: " + ", ".join(
                    f"{op['op']} {op['delta_us']:+.0f} us per step x{op['ratio']:.2f} "
                    f"({op['agree']}/{op['rounds']} rounds)" for op in moved) + ".")
        variant, dataset = bisect["case"].split("@")[:2]
        lines.append(f"- Reproduce: `{bisect['command']}`, or the releases: `gnnperf gate "
                     f"--base-python <venv of {bisect['good']}>/bin/python --head-python <venv of "
                     f"{bisect['bad']}>/bin/python --variants {variant} --datasets {dataset}`.")
        lines.append("")
    lines += _confirmed_regressions(data)
    return lines[:-1] if lines else ["No change was bisected or confirmed."]


def _confirmed_regressions(data: dict) -> list[str]:
    """A regression found by a comparison and found again by its repeat:
    the cases both runs call a regression, each run's ratio and the ops its
    profiles name, and the per-op overhead's change (dispatch or not)."""
    lines = []
    for again in (g for g in data["gates"] if g.get("repeat")):
        first = next((g for g in data["gates"] if not g.get("repeat")
                      and (g["series"], g["base"], g["head"]) == (again["series"], again["base"],
                                                                     again["head"])), None)
        if first is None:
            continue
        verdicts = [{c["case"]: c for c in g["cases"]} for g in (first, again)]
        both = [case for case in verdicts[1] if case in verdicts[0]
                and all(v[case]["verdict"] == "REGRESSION" for v in verdicts)]
        if not both:
            continue
        lines += [f"**{again['series']} {again['base_version']} -> {again['head_version']} slows "
                  f"GCN training steps on CPU ({again['fixed']})**", ""]
        for case in both:
            runs = "; ".join(f"{_ratio(v[case])} ({v[case]['pairs']} pairs)" for v in verdicts)
            lines.append(f"- `{case}`: step time ratio, two runs: {runs}.")
        for name, gate in (("first run", first), ("repeat", again)):
            ops = {op["op"] for case in both for op in gate.get("case_ops", {}).get(case, [])}
            lines.append(f"- Ops that moved consistently in the {name}'s profiles: "
                         + (", ".join(sorted(ops)) if ops else "none") + ".")
        lines.append("- Work per step identical (the work gate); "
                     + ("the two runs' profiles name different ops, so no single op is the cause "
                        "yet; " if len({frozenset(op["op"] for c in both for op in
                                                  g.get("case_ops", {}).get(c, []))
                                        for g in (first, again)}) > 1 else "")
                     + f"reproduce: `{again['command']}`.")
        lines.append("")
    return lines


def _commands(data: dict) -> list[str]:
    lines = ["```bash"]
    for gate in data["gates"]:
        if gate["command"]:
            lines.append(gate["command"])
    for bisect in data.get("bisects", []):
        lines.append(bisect["command"])
    lines.append("```")
    return lines


def _machine(data: dict) -> list[str]:
    m = data.get("machine") or {}
    return [f"The machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('os')}, Python "
            f"{m.get('python')}; no GPU."]


TABLES = {
    "machine": _machine,
    "pyg-gates": lambda d: _gates_table(d, "torch_geometric"),
    "torch-gates": lambda d: _gates_table(d, "torch"),
    "asv-time": lambda d: _asv_grid(d, "time_ms"),
    "asv-ops": lambda d: _asv_grid(d, "aten_ops"),
    "findings": _findings,
    "report": _report,
    "commands": _commands,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--gates", type=Path, required=True)
    c.add_argument("--asv-results", type=Path)
    c.add_argument("--tags", default="", help="tag=commit,... of the asv run")
    args = parser.parse_args(argv)
    tags = dict(item.split("=", 1) for item in args.tags.split(",") if item)
    collect(args.gates, args.asv_results, tags, DATA)
    print(f"wrote {DATA.relative_to(ROOT)} (python tools/figures.py renders the record)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
