"""docs/releases.md's tables are rendered from docs/data/releases.json by
tools/releases.py: a figure typed into the page, or data the page no longer
shows, fails here."""
from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path

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
    # Every table the tool renders is on the page.
    assert set(re.findall(r"<!-- releases:([a-z-]+) -->", page)) == set(tool.TABLES)


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
