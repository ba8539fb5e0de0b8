"""docs/releases.md's tables, findings and reports are rendered from
docs/data/releases.json by tools/releases.py: a figure typed into one of
those blocks, or data the page no longer shows, fails here; so does a
comparison the collector cannot read."""
from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("releases_tool", ROOT / "tools" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_release_page_is_its_data_rendered():
    tool = _tool()
    page = tool.PAGE.read_text()
    data = json.loads(tool.DATA.read_text())
    assert tool.render(page, data) == page, "python tools/releases.py page"
    # Every table the tool renders is on the page, each block closed.
    opened = re.findall(r"<!-- releases:([a-z-]+) -->", page)
    assert sorted(opened) == sorted(tool.TABLES)
    assert sorted(re.findall(r"<!-- /releases:([a-z-]+) -->", page)) == sorted(opened)


def test_a_typed_figure_or_a_changed_datum_is_caught():
    tool = _tool()
    page = tool.PAGE.read_text()
    data = json.loads(tool.DATA.read_text())
    gate = next(g for g in data["gates"] if g["cases"])
    edited = copy.deepcopy(data)
    case = next((c for c in edited["gates"][data["gates"].index(gate)]["cases"]
                 if c["verdict"] != "same"), None)
    if case is not None:
        case["ratio"] += 0.1
    else:
        edited["gates"][data["gates"].index(gate)]["exit"] = 99
    assert tool.render(page, edited) != page


def test_every_gate_on_the_page_says_how_to_repeat_it():
    data = json.loads(_tool().DATA.read_text())
    assert {g["series"] for g in data["gates"]} == {"torch_geometric", "torch"}
    for gate in data["gates"]:
        assert gate["command"] and gate["command"].startswith("gnnperf gate --base-python")
        assert gate["exit"] in (0, 1), gate
        assert gate["cases"], gate


def test_every_file_the_page_links_exists():
    tool = _tool()
    page = tool.PAGE.read_text()
    for target in re.findall(r"\]\((data/[^)#]+)\)", page):
        assert (tool.PAGE.parent / target).is_file(), target


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
