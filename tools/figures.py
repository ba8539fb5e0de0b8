"""Every measured figure the docs show, rendered from its data in docs/data:
the record (docs/results.md) and each figure the README or a guide quotes.

    python tools/figures.py            # render every block of README.md and docs/*.md
    python tools/figures.py --check    # exit 1 where a page differs from its data

A page holds a figure as a block whose body this script writes::

    <!-- figure:NAME -->
    (rendered from data: never edited by hand)
    <!-- /figure:NAME -->

NAME is a name of :func:`figures`. Each figure comes from one data file or
one record entry (docs/data/record.json: the question, the command, the
machine and the date of each measurement), so two pages that quote the same
figure quote the same value. tests/test_figures.py runs ``--check`` and
fails on a measured figure typed outside a block.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
#: The pages whose blocks are rendered: the README and every page of docs/.
PAGES = ("README.md", "docs/*.md")
BLOCK = re.compile(r"(<!-- figure:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /figure:(?P=name) -->)",
                   re.S)
#: The README's excerpt of the Cora comparison: the reference, the sampler and the fastest eager steps.
README_VARIANTS = ("baseline", "sampled", "sparse_features", "sparse+trimmed+sparse_features")
# Time to accuracy's excerpt: the schedule that changes it most, in place of sparse_features.
README_TTA_VARIANTS = ("baseline", "sampled", "sparse+trimmed+sparse_features",
                       "sparse+trimmed+sparse_features+lr_boost")


def _tool(name: str):
    """A sibling script of tools/ as a module (the scripts are no package)."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(name: str) -> dict:
    path = DATA / name
    if not path.is_file():
        raise SystemExit(f"docs/data/{name}: missing; the figure that quotes it cannot be rendered")
    return json.loads(path.read_text())


def record() -> dict[str, dict]:
    """The record's entries by key: question, data files, command, machine, date."""
    return {entry["key"]: entry for entry in _load("record.json")["entries"]}


def _entry(key: str) -> dict:
    entries = record()
    if key not in entries:
        raise SystemExit(f"docs/data/record.json: no entry {key!r}")
    return entries[key]


# -- the pieces every entry shows ------------------------------------------------

def _meta(key: str) -> list[str]:
    """What was measured, where, with which command and when: the entry's head."""
    entry = _entry(key)
    machine = entry.get("machine")
    if machine is None:  # a gnnperf run's JSON names its own machine
        env = _load(entry["data"][0])["environment"]
        machine = (f"{env['device_name']}, {env['cpu_count']} cores, {env['threads']} thread, "
                   f"torch {env['torch']}, torch_geometric {env['torch_geometric']}, "
                   f"Python {env['python']}; device {env['device']}")
    commands = entry["command"] if isinstance(entry["command"], list) else [entry["command"]]
    data = ", ".join(f"[{name}](data/{name})" for name in entry["data"])
    lines = [f"- **Question:** {entry['question']}",
             f"- **Machine:** {machine}",
             f"- **Date:** {entry['date']}",
             f"- **Data:** {data}",
             "- **Command:**", "", "```bash", *commands, "```"]
    if entry.get("note"):
        lines[4:4] = [f"- **Condition:** {entry['note']}"]
    return lines


def _fmt(value, digits: int = 2, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{suffix}"


def _run(key: str) -> dict:
    return _load(_entry(key)["data"][0])


def _comparison(key: str, only: tuple[str, ...] | None = None) -> list[str]:
    """The comparison table of a ``gnnperf run --json`` file (``only``: these variants)."""
    rows = [r for r in _run(key)["comparison"] if only is None or r["variant"] in only]
    # Runs that recorded it show the test accuracy at the best validation
    # epoch beside the last epoch's (data written before it have the last only).
    best = all("test_acc_best_val" in r for r in rows)
    lines = ["| variant | epoch ms (median ±IQR) | step peak MiB | test acc (last epoch) "
             + ("| test acc (best val) " if best else "") + "| speed-up vs baseline "
             "| roofline % (bound) | op traffic / compulsory | first epoch s | setup s |",
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if best else "")]
    for r in rows:
        setup = f"{r['setup_s']:.2f} ({r['setup']})" if r["setup_s"] is not None else ""
        lines.append(
            f"| `{r['variant']}` | {r['epoch_ms']:.2f} ±{r['spread_pct']:.0f}% | {_fmt(r['peak_mib'], 1)} "
            f"| {r['test_acc']:.3f} " + (f"| {_fmt(r['test_acc_best_val'], 3)} " if best else "")
            + f"| {_fmt(r['speedup'])}x | {_fmt(r['roofline_pct'], 1)} ({r['bound']}) "
            f"| {_fmt(r['traffic_over_compulsory'], 1)} | {r['first_epoch_s']:.2f} | {setup} |")
    return lines


def _time_to_accuracy(key: str, only: tuple[str, ...] | None = None) -> list[str]:
    tta = _run(key)["time_to_accuracy"]
    lines = [f"Target: {tta['target']['rule']}.", "",
             "| variant | s to target (median) | range s | reached | epoch | test acc there "
             "| epoch ms | one-off s |", "|---|---|---|---|---|---|---|---|"]
    for r in tta["rows"]:
        if only is not None and r["label"] not in only:
            continue
        if not r["reached"]:
            lines.append(f"| `{r['label']}` | not reached | | 0/{len(r['seeds'])} | | "
                         f"| {r['epoch_s'] * 1e3:.2f} | {r['setup_s']:.2f} |")
            continue
        reached = [e for e in r["epochs"] if e is not None]
        lines.append(
            f"| `{r['label']}` | {r['median_s']:.2f} | {r['spread_s'][0]:.2f}-{r['spread_s'][1]:.2f} "
            f"| {r['reached']}/{len(r['seeds'])} | {statistics.median_low(reached)} "
            f"| {r['median_test_acc']:.3f} | {r['epoch_s'] * 1e3:.2f} | {r['setup_s']:.2f} |")
    return lines + ["", tta["verdict"].capitalize() + "."]


def _sensitivity(key: str) -> list[str]:
    """The default (adaptive) gate's verdicts in each study of the entry, judged
    by the gate's current rule (as ``gnnperf sensitivity --from-json`` does)."""
    from gnnperf.gate.decision import adaptive_budget
    from gnnperf.gate.sensitivity import evaluate, rejudge
    entry = _entry(key)
    lines = ["| case | condition | A/A wrong either way | +3% detected | +5% detected | mean pairs "
             "| data |", "|---|---|---|---|---|---|---|"]
    for name, label in entry["labels"].items():
        study = rejudge(_load(name))
        s = study["settings"]
        budget = adaptive_budget(s["processes"], s.get("max_processes"))
        row = evaluate(study["trials"], [s["threshold"]], s["alpha"], clocks=(),
                       adaptive=(s["processes"], budget, s["threshold"]))[0]
        case, condition = label.split("|")
        cells = [case, condition, "{}/{}".format(*row["aa_wrong"]) if "aa_wrong" in row else "-"]
        cells += ["{}/{}".format(*row[slowdown]) if slowdown in row else "-" for slowdown in (0.03, 0.05)]
        cells += [f"{row['pairs']:.1f}", f"[json](data/{name})"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _saint_roots(key: str) -> list[str]:
    """GraphSAINT at each root count against Cluster-GCN on the same graph:
    the sampler's figures, the epoch's time and the test accuracy over the
    seeds (last epoch, and at the best validation epoch)."""
    import statistics as st

    from gnnperf.measure.convergence import test_at_best_val
    lines = ["| graph | variant | roots | mean subgraph nodes | steps an epoch | epoch ms (seed 0) "
             "| test acc, last epoch (mean; seeds) | test acc at best val (mean; seeds) |",
             "|---|---|---|---|---|---|---|---|"]
    shown = set()
    for name in _entry(key)["data"]:
        doc = _load(name)
        graph = doc["config"]["dataset"]
        for variant in dict.fromkeys(r["variant"] for r in doc["results"]):
            runs = sorted((r for r in doc["results"] if r["variant"] == variant), key=lambda r: r["seed"])
            extra = runs[0]["extra"]
            if variant == "cluster":
                if (graph, variant) in shown:  # the same cluster runs beside each root count
                    continue
                roots, mean = "", ""
            else:
                roots = str(extra["saint_roots"])
                mean = f"{extra['saint_mean_subgraph_nodes']:,.0f}"
            shown.add((graph, variant))
            last = [r["test_acc"] for r in runs]
            best = [test_at_best_val(r["val_acc"], r["test_acc_per_epoch"]) for r in runs]
            lines.append(
                f"| {graph} | `{variant}` | {roots} | {mean} | {runs[0]['steps_per_epoch']} "
                f"| {runs[0]['epoch_s_median'] * 1e3:.0f} "
                f"| {st.fmean(last):.3f}; {', '.join(f'{v:.3f}' for v in last)} "
                f"| {st.fmean(best):.3f}; {', '.join(f'{v:.3f}' for v in best)} |")
    return lines


def _history_detection(key: str) -> list[str]:
    entry = _entry(key)
    studies = {label: _load(name) for name, label in entry["labels"].items()}
    return _tool("history_study").format_windows(studies).splitlines()


def _scratch_history(key: str) -> list[str]:
    entry = _entry(key)
    # The spread of a history's values includes what the history injects (a
    # ramp's rise): it reads as noise only on a history without a change.
    lines = ["| history | figure | sd of its values (a ramp's included) | `gnnperf history` | `asv publish` |",
             "|---|---|---|---|---|"]
    for name, label in entry["labels"].items():
        doc = _load(name)
        for figure, series in zip(("raw", "relative"), doc["series"].values()):
            values = [v["value"] for v in series]
            sd = statistics.stdev(values) / statistics.fmean(values) * 100
            changes = doc["gnnperf_history"][figure]["changes"]
            found = "; ".join(
                f"{'REGRESSION' if c['regression'] else 'change'} at commit {c['position']}: "
                f"{c['series'][0]['ratio']:.3f} [{c['series'][0]['ci_low']:.3f}, "
                f"{c['series'][0]['ci_high']:.3f}]" for c in changes) or "no change"
            asv = ", ".join(map(str, doc["asv_publish_regressions"])) or "no regression"
            title = {"raw": "raw step time", "relative": "step over the reference"}[figure]
            lines.append(f"| {label} | {title} | {sd:.1f}% | {found} | {asv} |")
    return lines


def _figure_spread(key: str) -> list[str]:
    entry = _entry(key)
    lines = ["| run | figure | mean | min-max | sd |", "|---|---|---|---|---|"]
    for name, label in entry["labels"].items():
        doc = _load(name)
        for figure, s in doc["summary"].items():
            scale, unit = (1e3, " ms") if figure.endswith("_s") else (1, "")
            lines.append(f"| {label} | {figure} | {s['mean'] * scale:.3f}{unit} "
                         f"| {s['min'] * scale:.3f}-{s['max'] * scale:.3f}{unit} | {s['sd_pct']:.1f}% |")
    return lines


def _against_plain_loop(key: str) -> list[str]:
    """Time to the target of the first variant against the plain loop
    (``tutorial``) of the same run, and its test accuracy at the best
    validation epoch against the baseline's, both medians over the seeds."""
    run = _run(key)
    rows = {r["label"]: r for r in run["time_to_accuracy"]["rows"]}
    reached = sorted((r for r in rows.values() if r["median_s"] is not None),
                     key=lambda r: r["median_s"])
    plain, first = rows.get("tutorial"), reached[0]

    def best_val_test(label: str) -> float:
        return statistics.median(r["test_acc_best_val"] for r in run["results"]
                                 if r["variant"] == label)
    if plain is None or plain["median_s"] is None:
        versus = "the plain loop (`tutorial`) did not reach it"
    else:
        versus = (f"{plain['median_s'] / first['median_s']:.1f}x sooner than the plain loop "
                  f"(`tutorial`, {plain['median_s']:.3f} s)")
    return [f"First `{first['label']}` in {first['median_s']:.3f} s, one-off work included: "
            f"{versus}. Its test accuracy at the best validation epoch "
            f"{best_val_test(first['label']):.3f}, `baseline`'s {best_val_test('baseline'):.3f} "
            f"(medians over the seeds)."]


def _fast_path_spread(key: str) -> list[str]:
    doc = _run(key)
    s = doc["summary"]
    lines = ["| variant | plain step over it (median of processes) | min-max | epoch ms (median) "
             "| min-max |", "|---|---|---|---|---|"]
    for variant, f in s["processes"].items():
        lines.append(f"| `{variant}` | {f['median_ratio']:.2f}x | {f['ratio_min']:.2f}-"
                     f"{f['ratio_max']:.2f}x | {f['median_ms']:.3f} | {f['ms_min']:.3f}-"
                     f"{f['ms_max']:.3f} |")
    plain = s["plain_ms"]
    lines.append(f"| `{doc['plain']}` (the plain step) | | | {plain['median']:.3f} "
                 f"| {plain['min']:.3f}-{plain['max']:.3f} |")
    rounds = doc["interleaved"]
    lines += ["", f"In one process, `{rounds['variant']}` of each seed and the plain step timed in "
              f"turn, {len(rounds['plain_over_fast_by_round'])} rounds of "
              f"{rounds['epochs_per_round']} epochs each:", "",
              "| run | median of rounds, ms | fastest round | slowest round |", "|---|---|---|---|"]
    for name, f in s["rounds"].items():
        lines.append(f"| {name} | {f['median_ms']:.3f} | {f['min_ms']:.3f} | {f['max_ms']:.3f} |")
    r = s["round_ratio"]
    lines += ["", f"The plain step over the fast path, round by round: {r['median']:.2f}x "
              f"(median; {r['min']:.2f}-{r['max']:.2f}x)."]
    return lines


def _sampler(key: str) -> list[str]:
    """``gnnperf sampler --json`` runs, one row each: the sampler alone and in
    the loader, the loader's share of the gather roof, its batch by part."""
    lines = ["| run | sampler alone, ms | loader batch, ms | MiB a batch (by gathers) "
             "| GB/s | **share of the gather roof** | in the loader: sampling, ms "
             "| feature gather, ms (share of the roof) | the rest, ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for number, name in enumerate(_entry(key)["data"], start=1):
        r = _load(name)["result"]
        work, roof, parts = r["loader_work"], r["loader_roofline"], r["loader_parts"]
        gather = parts["feature_gather_ms"]
        lines.append(
            f"| {number} | {r['sampler_batch_ms']['median']:.2f} "
            f"| {r['loader_batch_ms']['median']:.2f} "
            f"| {work['bytes_moved'] / 2 ** 20:.1f} "
            f"({work['gather_bytes'] / work['bytes_moved']:.0%}) "
            f"| {roof['achieved_bytes_per_s'] / 1e9:.2f} | **{r['gather_roof_pct']:.0f}%** "
            f"| {parts['sampling_ms']['median']:.2f} "
            f"| {_fmt(gather and gather['median'])} "
            f"({_fmt(parts['feature_gather_roof_pct'], 0, '%')}) "
            f"| {parts['rest_ms']['median']:.2f} |")
    first = _load(_entry(key)["data"][0])["result"]
    lines += ["", f"The gather roof: {first['loader_roofline']['gather_bytes_per_s'] / 1e9:.1f} "
              f"GB/s at the batch's {first['loader_work']['working_set_bytes'] / 2 ** 20:.0f} MiB "
              "working set; medians of each run's batches."]
    return lines


def _main_job(key: str) -> list[str]:
    doc = _run(key)
    lines = [f"`{doc['command']}` took **{doc['wall_s']:.1f} s** with an empty gnnperf cache "
             f"({doc['variants']} variants, {doc['epochs']} epochs each).", "",
             "| where the time went | s |", "|---|---|"]
    lines += [f"| {phase} | {seconds:.1f} |" for phase, seconds in doc["phases_s"].items()]
    return lines


def _releases(table: str):
    def render() -> list[str]:
        return _tool("releases").TABLES[table](_load("releases.json"))
    return render


def _entry_figures() -> dict:
    """Every record entry's head and tables, by block name."""
    kinds = {"run": lambda k: _comparison(k) + [""] + _time_to_accuracy(k),
             "sensitivity": _sensitivity, "history-detection": _history_detection,
             "scratch-history": _scratch_history, "figure-spread": _figure_spread,
             "saint-roots": _saint_roots, "fast-path-spread": _fast_path_spread,
             "main-job": _main_job, "sampler": _sampler,
             "run-vs-plain": lambda k: (_time_to_accuracy(k) + [""]
                                        + _against_plain_loop(k))}
    figures = {}
    for key, entry in record().items():
        figures[f"{key}-meta"] = lambda k=key: _meta(k)
        if entry["kind"] in kinds:
            figures[key] = lambda k=key, kind=entry["kind"]: kinds[kind](k)
    return figures


def figures() -> dict:
    """Block name -> a function rendering its lines."""
    table = _entry_figures()
    table.update({
        "readme-cora": lambda: _comparison("cora", README_VARIANTS),
        "readme-cora-tta": lambda: _time_to_accuracy("cora", README_TTA_VARIANTS),
    })
    for name in ("machine", "pyg-gates", "torch-gates", "findings", "asv-time", "asv-ops",
                 "report", "commands"):
        table[f"releases-{name}"] = _releases(name)
    return table





def render(page: str, where: str, table: dict) -> str:
    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in table:
            raise SystemExit(f"{where}: no figure named {name!r} (tools/figures.py: {', '.join(sorted(table))})")
        return match.group(1) + "\n".join(table[name]()) + "\n" + match.group(4)
    return BLOCK.sub(fill, page)


def pages(root: Path = ROOT) -> list[Path]:
    return sorted(p for pattern in PAGES for p in root.glob(pattern))


SLIM_NOTE = ("slimmed from gnnperf run --json: the run's environment, settings, comparison rows, "
             "time-to-accuracy rows and each result's test accuracy at its best validation "
             "epoch (the per-step samples and curves are left out)")


def slim_run(doc: dict) -> dict:
    """A ``gnnperf run --json`` document as the record keeps it: what the
    renderers read, without the per-step samples and curves."""
    from gnnperf.measure.convergence import test_at_best_val
    kept = {key: doc[key] for key in ("schema_version", "complete", "environment", "config",
                                      "reference", "comparison", "failures", "unavailable",
                                      "time_to_accuracy") if key in doc}
    kept["results"] = [
        {"variant": r["variant"], "model": r["model"], "seed": r["seed"],
         "test_acc_best_val": test_at_best_val(r["convergence"]["val_acc"],
                                               r["convergence"]["test_acc"])}
        for r in doc.get("results", []) if r.get("convergence")]
    return {"note": SLIM_NOTE, **kept}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 where a page differs from its data")
    parser.add_argument("--slim", type=Path, nargs="+", metavar="RUN_JSON",
                        help="first slim these gnnperf run --json files in place (slim_run)")
    args = parser.parse_args(argv)
    for path in args.slim or []:
        path.write_text(json.dumps(slim_run(json.loads(path.read_text())), indent=1) + "\n")
    table = figures()
    stale = []
    for path in pages():
        text = path.read_text()
        rendered = render(text, str(path.relative_to(ROOT)), table)
        if rendered != text:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(rendered)
    if args.check and stale:
        print(f"{', '.join(stale)}: differ from docs/data; python tools/figures.py renders them",
              file=sys.stderr)
        return 1
    print(f"{'differ' if args.check else 'rendered'}: {', '.join(stale) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
