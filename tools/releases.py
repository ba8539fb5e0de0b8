"""What each torch_geometric and torch release did to GNN training on one
machine: the data of docs/releases.md and the page's tables rendered from it.

    python tools/releases.py collect --gates DIR [--asv-results DIR]   # docs/data/releases.json
    python tools/releases.py page [--check]                           # the page's tables

``collect`` reads the JSON of each ``gnnperf gate`` between two releases
(``<series>-<base>-<head>.json`` in ``--gates``, series ``pyg`` or
``torch``; the command that wrote it in ``<name>.cmd``, its exit status in
``<name>.rc``) and asv's results over the release tags (the machine's folder
of an adopting repository's ``.gnnperf/.asv/results``). ``page`` writes
every table of docs/releases.md between its ``<!-- releases:NAME -->``
markers from that data alone; ``--check`` exits 1 where the page differs
(tests/test_releases.py runs it).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data" / "releases.json"
PAGE = ROOT / "docs" / "releases.md"
SERIES = {"pyg": "torch_geometric", "torch": "torch"}
#: asv benchmarks the page tabulates, by the name asv gives them.
ASV_TIME = "training.TrainStep.time_train_step"
ASV_OPS = "work_metrics.WorkMetrics.track_aten_ops"


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+]", version))


def _gate(path: Path) -> dict:
    doc = json.loads(path.read_text())
    series, base, head = path.stem.split("-", 2)
    arms = doc["arms"]
    fixed = "torch" if series == "pyg" else "torch_geometric"
    cmd = path.with_suffix(".cmd")
    rc = path.with_suffix(".rc")
    start = path.with_suffix(".start")
    changed = [row for row in doc["work"]["rows"] if not row.get("same", True) and "op_diff" not in row]
    ops = {row["case"]: row["op_diff"] for row in doc["work"]["rows"] if "op_diff" in row}
    explain = doc.get("explain") or {}
    shift = (explain.get("shift") or {})
    return {
        "series": SERIES[series], "base": base, "head": head,
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
        "top_ops": [{k: op[k] for k in ("op", "base_us", "head_us", "ratio", "agree", "rounds")}
                    for op in (explain.get("all_cases") or [])[:5]],
    }


def _asv(results: Path, tags: dict[str, str]) -> dict:
    """Per tag: each variant's step time (ms) and ATen op count from asv's
    result files in one machine's folder (``tags``: tag -> full commit)."""
    by_commit = {}
    for path in results.glob("*.json"):
        doc = json.loads(path.read_text())
        if "commit_hash" not in doc:
            continue
        columns = doc["result_columns"]
        row = {}
        for name, key in ((ASV_TIME, "time_ms"), (ASV_OPS, "aten_ops")):
            if name not in doc["results"]:
                continue
            got = dict(zip(columns, doc["results"][name]))
            datasets, variants, *rest = ([p.strip("'") for p in axis] for axis in got["params"])
            values = got["result"] or []
            # params: dataset x variant (x model); one dataset and one model here.
            per_variant = {}
            for i, variant in enumerate(variants):
                value = values[i] if i < len(values) else None
                if value is not None and value == value and key == "time_ms":
                    value = round(value * 1e3, 3)
                per_variant[variant] = value if value == value else "n/a"
            row[key] = per_variant
            row["started"] = doc.get("started_at")
        by_commit[doc["commit_hash"]] = row
    return {"benchmarks": [ASV_TIME, ASV_OPS],
            "tags": [{"tag": tag, "commit": commit, **by_commit.get(commit, {})}
                     for tag, commit in sorted(tags.items(), key=lambda t: _version_key(t[0]))]}


def collect(gates: Path, asv_results: Path | None, tags: dict[str, str], out: Path) -> dict:
    found = sorted(gates.glob("*-*-*.json"),
                   key=lambda p: (p.stem.split("-")[0], _version_key(p.stem.split("-")[1])))
    data = {"gates": [_gate(p) for p in found if p.stem.split("-")[0] in SERIES]}
    if asv_results is not None:
        data["asv"] = _asv(asv_results, tags)
        machine = json.loads((asv_results / "machine.json").read_text())
        data["asv"]["machine"] = {k: machine.get(k) for k in ("cpu", "num_cpu", "ram", "os")}
    out.write_text(json.dumps(data, indent=1) + "\n")
    return data


# --- the page -------------------------------------------------------------------------------

def _ratio(case: dict) -> str:
    return f"{case['ratio']:.3f} [{case['ci_low']:.3f}, {case['ci_high']:.3f}]"


def _gates_table(data: dict, series: str) -> list[str]:
    lines = ["| from | to | held fixed | exit | slower | faster | same | work changed | step-time ratio, 95% interval (regressions and improvements) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for gate in data["gates"]:
        if gate["series"] != series:
            continue
        count = {v: sum(c["verdict"] == v for c in gate["cases"])
                 for v in ("REGRESSION", "improvement", "same")}
        moved = [f"{c['case']} {_ratio(c)}" for c in gate["cases"] if c["verdict"] != "same"]
        work = sorted({f"{w['case']} {w['metric']}" for w in gate["work_changed"]})
        failed = sorted(set(gate["failed"]["base"]) | set(gate["failed"]["head"]))
        note = "; ".join(moved) or "none"
        if failed:
            note += "; failed in an arm: " + ", ".join(failed)
        lines.append(f"| {gate['base_version']} | {gate['head_version']} | {gate['fixed']} | "
                     f"{gate['exit']} | {count['REGRESSION']} | {count['improvement']} | "
                     f"{count['same']} | {', '.join(work) or 'none'} | {note} |")
    return lines


def _asv_table(data: dict) -> list[str]:
    asv = data.get("asv")
    if not asv:
        return ["(no asv results collected)"]
    variants = []
    for tag in asv["tags"]:
        for v in tag.get("time_ms", {}):
            if v not in variants:
                variants.append(v)
    lines = ["| release | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for tag in asv["tags"]:
        cells = []
        for v in variants:
            value = tag.get("time_ms", {}).get(v)
            cells.append("failed" if value is None else value if isinstance(value, str)
                         else f"{value:.2f}")
        lines.append(f"| {tag['tag']} | " + " | ".join(cells) + " |")
    return lines


def _asv_ops_table(data: dict) -> list[str]:
    asv = data.get("asv")
    if not asv:
        return ["(no asv results collected)"]
    rows = []
    for tag in asv["tags"]:
        ops = tag.get("aten_ops", {})
        if ops:
            rows.append((tag["tag"], ops))
    if not rows:
        return ["(no op counts collected)"]
    variants = list(rows[0][1])
    lines = ["| release | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for tag, ops in rows:
        lines.append(f"| {tag} | " + " | ".join(
            "failed" if ops.get(v) is None else str(ops.get(v)) for v in variants) + " |")
    return lines


def _commands(data: dict) -> list[str]:
    lines = ["```bash"]
    for gate in data["gates"]:
        if gate["command"]:
            lines.append(gate["command"])
    lines.append("```")
    return lines


TABLES = {
    "pyg-gates": lambda d: _gates_table(d, "torch_geometric"),
    "torch-gates": lambda d: _gates_table(d, "torch"),
    "asv-time": _asv_table,
    "asv-ops": _asv_ops_table,
    "commands": _commands,
}
_BLOCK = re.compile(r"(<!-- releases:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /releases:(?P=name) -->)",
                    re.S)


def render(page: str, data: dict) -> str:
    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise SystemExit(f"docs/releases.md: no table named {name!r} ({', '.join(TABLES)})")
        return match.group(1) + "\n".join(TABLES[name](data)) + "\n" + match.group(4)
    return _BLOCK.sub(fill, page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--gates", type=Path, required=True)
    c.add_argument("--asv-results", type=Path)
    c.add_argument("--tags", default="", help="tag=commit,... of the asv run")
    p = sub.add_parser("page")
    p.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "collect":
        tags = dict(item.split("=", 1) for item in args.tags.split(",") if item)
        collect(args.gates, args.asv_results, tags, DATA)
        print(f"wrote {DATA.relative_to(ROOT)}")
        return 0
    data = json.loads(DATA.read_text())
    page = PAGE.read_text()
    rendered = render(page, data)
    if args.check:
        if rendered != page:
            print("docs/releases.md differs from docs/data/releases.json: "
                  "python tools/releases.py page", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(rendered)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
