"""The record's release tables, findings and reports (docs/results.md, "What
each release did") are rendered from docs/data/releases.json by
tools/releases.py's tables: a table the record no longer shows, or data the
tables ignore, fails here; so does a comparison the collector cannot read."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from tool_script import load_tool

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    return load_tool("releases")


def test_every_release_table_is_on_the_record():
    """Each table the tool renders stands on docs/results.md as a figure
    block (tools/figures.py renders it; tests/test_figures.py checks it)."""
    page = (ROOT / "docs" / "results.md").read_text()
    opened = set(re.findall(r"<!-- figure:releases-([a-z-]+) -->", page)) - {"meta"}  # the entry's head
    assert sorted(opened) == sorted(_tool().TABLES)


def test_a_changed_datum_changes_the_rendered_tables():
    tool = _tool()
    data = json.loads(tool.DATA.read_text())
    gate = next(g for g in data["gates"] if g["cases"])
    edited = copy.deepcopy(data)
    case = next((c for c in edited["gates"][data["gates"].index(gate)]["cases"]
                 if c["verdict"] != "same"), None)
    if case is not None:
        case["ratio"] += 0.1
    else:
        edited["gates"][data["gates"].index(gate)]["exit"] = 99
    assert any(table(edited) != table(data) for table in tool.TABLES.values())


def test_every_gate_on_the_page_says_how_to_repeat_it():
    data = json.loads(_tool().DATA.read_text())
    assert {g["series"] for g in data["gates"]} == {"torch_geometric", "torch"}
    for gate in data["gates"]:
        assert gate["command"] and gate["command"].startswith("gnnperf gate --base-python")
        assert gate["exit"] in (0, 1), gate
        assert gate["cases"], gate


def _gate_doc(fixed_torch: str = "2.13.0+cpu") -> dict:
    arm = {"python": "3.11.7", "gnnperf": "0.1.0", "torch": "2.13.0+cpu"}
    return {"arms": {"base": {**arm, "torch_geometric": "2.4.0"},
                     "head": {**arm, "torch_geometric": "2.5.3", "torch": fixed_torch}},
            "settings": {"processes": 6},
            "work": {"rows": [{"case": "baseline@cora", "metric": "aten_ops", "base": 100,
                               "head": 98, "same": False},
                              {"case": "baseline@cora", "metric": "op_counts", "base": None,
                               "head": None, "same": False, "op_diff": {"aten.select": [6, 4]}}]},
            "time": {"verdicts": [{"case": "baseline@cora", "ratio": 1.06, "ci_low": 1.05,
                                   "ci_high": 1.07, "verdict": "REGRESSION", "pairs": 6}]},
            "base_failed": {}, "head_failed": {"tutorial@cora": "RuntimeError: x"}}


def test_collect_reads_gates_and_bisects_as_the_commands_write_them(tmp_path):
    tool = _tool()
    (tmp_path / "pyg-2.4.0-2.5.3.json").write_text(json.dumps(_gate_doc()))
    (tmp_path / "pyg-2.4.0-2.5.3.cmd").write_text("gnnperf gate --base-python a --head-python b")
    (tmp_path / "pyg-2.4.0-2.5.3.rc").write_text("1\n")
    (tmp_path / "bisect-pyg-2.4.0-2.5.0.txt").write_text(
        "first changed commit: 570f08e54149 Enable JIT mode by default (#8772)\n"
        "aten_ops: 100 -> 98\n10 measurements in 139 s\n")
    (tmp_path / "bisect-pyg-2.4.0-2.5.0.cmd").write_text(
        "gnnperf bisect 2.4.0 2.5.0 --library-repo pyg --case baseline@cora --metric aten_ops")
    (tmp_path / "bisect-pyg-2.4.0-2.5.0-time.txt").write_text(
        "first changed commit: e387d7530172 `EdgeIndex` in `NeighborLoader` (#8686)\n"
        "time: 3.932 ms -> 4.366 ms (NOT confirmed: the change may be spread over commits)\n"
        "11 measurements in 562 s\n")
    (tmp_path / "bisect-pyg-2.4.0-2.5.0-time.cmd").write_text(
        "gnnperf bisect 2.4.0 2.5.0 --library-repo pyg --case sampled@synthetic-10k --metric time")
    data = tool.collect(tmp_path, None, {}, tmp_path / "out.json")
    [gate] = data["gates"]
    assert (gate["base_version"], gate["head_version"], gate["fixed"], gate["exit"]) == \
        ("2.4.0", "2.5.3", "torch 2.13.0+cpu", 1)
    assert gate["ops_changed"] == {"baseline@cora": {"aten.select": [6, 4]}}
    assert gate["work_changed"] == [{"case": "baseline@cora", "metric": "aten_ops",
                                     "base": 100, "head": 98}]
    assert gate["failed"]["head"] == {"tutorial@cora": "RuntimeError: x"}
    ops, time = sorted(data["bisects"], key=lambda b: b["metric"])
    assert (ops["commit"], ops["before"], ops["after"], ops["confirmed"]) == \
        ("570f08e54149", "100", "98", True)
    assert (time["case"], time["before"], time["after"], time["confirmed"]) == \
        ("sampled@synthetic-10k", "3.932 ms", "4.366 ms", False)
    findings = "\n".join(tool.TABLES["findings"](data))
    assert "-2 aten.select 6->4" in findings and "570f08e54149" in findings
    assert "(not confirmed)" in findings


def test_a_comparison_that_changes_two_releases_is_refused(tmp_path):
    tool = _tool()
    (tmp_path / "pyg-2.4.0-2.5.3.json").write_text(json.dumps(_gate_doc("2.14.1")))
    with pytest.raises(SystemExit, match="differ in torch too"):
        tool.collect(tmp_path, None, {}, tmp_path / "out.json")


def test_a_builds_local_version_sorts_with_its_release():
    tool = _tool()
    assert tool._version_key("2.14.1+cu130") == tool._version_key("2.14.1")
    assert tool._version_key("v2.5.0") < tool._version_key("2.5.3") < tool._version_key("2.15.0")


def test_collect_reads_asv_results_of_the_release_tags(tmp_path):
    """asv's machine folder, read by gnnperf's reader of asv's results: each
    variant's step time in ms and ATen ops per tag, an n/a as "n/a", a
    failure as null, tags in release order."""
    tool = _tool()
    machine = tmp_path / "asv" / "m"
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    params = [["'cora'"], ["'baseline'", "'sampled'", "'tutorial'"], ["'gcn'"]]
    columns = ["result", "params", "version", "started_at", "duration"]
    commits = {"2.5.0": "b" * 40, "2.4.0": "a" * 40}
    for k, (tag, commit) in enumerate(sorted(commits.items())):
        (machine / f"{commit[:8]}-env.json").write_text(json.dumps({
            "commit_hash": commit, "env_name": "env", "version": 2, "result_columns": columns,
            "results": {tool.ASV_TIME: [[0.024 + k / 1e3, float("nan"), None], params, "1"],
                        tool.ASV_OPS: [[100 - 2 * k, 99, 156] if k == 0 else None,
                                       params[:2], "1"]}}))
    data = tool.collect(tmp_path, machine, commits, tmp_path / "out.json")
    assert data["asv"]["machine"] == "m" and data["asv"]["benchmarks"] == [tool.ASV_TIME,
                                                                           tool.ASV_OPS]
    old, new = data["asv"]["tags"]
    assert (old["tag"], old["commit"], new["tag"]) == ("2.4.0", "a" * 40, "2.5.0")
    assert old["time_ms"] == {"baseline": 24.0, "sampled": "n/a", "tutorial": None}
    assert old["aten_ops"] == {"baseline": 100, "sampled": 99, "tutorial": 156}
    assert new["time_ms"]["baseline"] == 25.0
    assert new["aten_ops"] == {"baseline": None, "sampled": None, "tutorial": None}
    with pytest.raises(SystemExit, match="no machine name"):
        tool.collect(tmp_path, tmp_path / "asv", commits, tmp_path / "out.json")
