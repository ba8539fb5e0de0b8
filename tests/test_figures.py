"""Every measured figure in the README and docs/ is rendered from docs/data by
tools/figures.py: a figure that differs from its data, a figure whose data
is missing, and a measured figure typed outside a rendered block all fail."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tool_script import load_tool

ROOT = Path(__file__).resolve().parent.parent


def _figures():
    return load_tool("figures")


#: What a measured figure looks like in prose: a decimal speed-up or ratio
#: (8.75x, x1.16), a decimal time, memory, bandwidth or share (17.10 ms,
#: 22.2 MiB, +9.7%), a spread (±4%). Settings are whole numbers (a 3%
#: threshold, 200 epochs, 12 ms samples, a 64 MiB buffer) and no figures.
MEASURED = re.compile(r"\b\d+\.\d+(?:x|%|\s?(?:ms|µs|us|s|MiB|GiB|GB/s|MB/s))(?!\w)|±\s?\d+(?:\.\d+)?%"
                      r"|\bx\d+\.\d+\b")


def typed_figures(text: str) -> list[tuple[int, str]]:
    """(line, figure) of each measured figure outside a rendered block
    (tools/figures.py's block markers)."""
    found, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"<!-- figure:[a-z0-9-]+ -->", line):
            inside = True
        elif re.match(r"<!-- /figure:[a-z0-9-]+ -->", line):
            inside = False
        elif not inside:
            found += [(number, m.group(0)) for m in MEASURED.finditer(line)]
    return found


def test_every_figure_matches_its_data():
    assert _figures().main(["--check"]) == 0, "python tools/figures.py renders the pages again"


def test_no_measured_figure_is_typed_outside_a_block():
    typed = [f"{path.relative_to(ROOT)}:{line}: {figure}"
             for path in _figures().pages() for line, figure in typed_figures(path.read_text())]
    assert not typed, ("measured figures typed by hand (render them from docs/data with "
                       "tools/figures.py, or link docs/results.md):\n" + "\n".join(typed))


def test_the_check_sees_a_typed_figure_and_passes_a_rendered_one():
    page = ("The fast path is 8.75x faster (1.95 ms, ±7%), memory x0.02, +9.7%.\n"
            "<!-- figure:readme-cora -->\nIt is 9.58x faster.\n<!-- /figure:readme-cora -->\n"
            "The gate's threshold is 3% over 200 epochs.\n")
    assert [figure for _, figure in typed_figures(page)] == ["8.75x", "1.95 ms", "±7%", "x0.02", "9.7%"]


def test_a_stale_figure_is_rendered_again(tmp_path):
    figures = _figures()
    table = figures.figures()
    page = "<!-- figure:readme-cora -->\n| `baseline` | 1.00 ms typed |\n<!-- /figure:readme-cora -->\n"
    rendered = figures.render(page, "page.md", table)
    assert "typed" not in rendered
    assert rendered.splitlines()[1:-1] == table["readme-cora"]()


def test_a_figure_whose_data_is_missing_fails(tmp_path, monkeypatch):
    figures = _figures()
    monkeypatch.setattr(figures, "DATA", tmp_path)
    (tmp_path / "record.json").write_text((ROOT / "docs" / "data" / "record.json").read_text())
    page = "<!-- figure:cora -->\n<!-- /figure:cora -->\n"
    with pytest.raises(SystemExit, match="run-cora.json: missing"):
        figures.render(page, "page.md", figures.figures())


def test_an_unknown_figure_fails():
    figures = _figures()
    with pytest.raises(SystemExit, match="no figure named 'nowhere'"):
        figures.render("<!-- figure:nowhere -->\n<!-- /figure:nowhere -->\n", "page.md",
                       figures.figures())


def test_every_record_entry_stands_once_on_the_record_page():
    """Each entry shows its question, machine, command and date, and its
    figures, once: a figure quoted elsewhere (the README's excerpt) renders
    from the same entry, so no two pages can quote it differently."""
    page = (ROOT / "docs" / "results.md").read_text()
    entries = json.loads((ROOT / "docs" / "data" / "record.json").read_text())["entries"]
    for entry in entries:
        assert page.count(f"<!-- figure:{entry['key']}-meta -->") == 1, entry["key"]
        if entry["kind"] != "releases":  # its tables are the releases-* blocks
            assert page.count(f"<!-- figure:{entry['key']} -->") == 1, entry["key"]
        assert page.count(f"\n## {entry['title']}\n") == 1, entry["title"]


def test_every_record_entry_names_data_that_exists():
    entries = json.loads((ROOT / "docs" / "data" / "record.json").read_text())["entries"]
    missing = [f"{e['key']}: {name}" for e in entries for name in e["data"]
               if not (ROOT / "docs" / "data" / name).is_file()]
    assert not missing
    for entry in entries:  # what a reader needs to trust an entry
        assert {"question", "command", "date", "title"} <= set(entry), entry["key"]


def test_the_time_to_accuracy_table_shows_an_epoch_a_seed_reached_as_the_cli_does(monkeypatch):
    # Two of three seeds reached it, at epochs 39 and 48: the CLI's table says
    # 39 (the lower median); their mean, 43, is an epoch no run reached it at.
    figures = _figures()
    row = {"label": "baseline", "seeds": [0, 1, 2], "seconds": [24.7, None, 31.0],
           "epochs": [39, None, 48], "test_acc": [0.74, None, 0.75], "epoch_s": 0.6,
           "setup_s": 0.0, "eval_s": 2.0, "reached": 2, "median_s": 31.0,
           "spread_s": [24.7, 31.0], "median_test_acc": 0.745}
    run = {"time_to_accuracy": {"target": {"rule": "validation accuracy 0.731"},
                                "rows": [row], "verdict": "time to accuracy: first baseline"}}
    monkeypatch.setattr(figures, "_run", lambda key: run)
    line = next(line for line in figures._time_to_accuracy("any") if "`baseline`" in line)
    assert line.split(" | ")[4] == "39"
