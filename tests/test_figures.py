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


#: What a measured figure looks like in prose: a decimal speed-up (8.75x), a
#: decimal time, memory or bandwidth (17.10 ms, 22.2 MiB), a spread (±4%).
#: Settings are whole numbers (a 3% threshold, 200 epochs, 12 ms samples, a
#: 64 MiB buffer) and no figures.
MEASURED = re.compile(r"\b\d+\.\d+(?:x|\s?(?:ms|µs|us|s|MiB|GiB|GB/s|MB/s))(?!\w)|±\s?\d+(?:\.\d+)?%")


def typed_figures(text: str) -> list[tuple[int, str]]:
    """(line, figure) of each measured figure outside a rendered block."""
    figures = _figures()
    found, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"<!-- figure:[a-z0-9-]+ -->", line):
            inside = True
        elif re.match(r"<!-- /figure:[a-z0-9-]+ -->", line):
            inside = False
        elif not inside:
            found += [(number, m.group(0)) for m in MEASURED.finditer(line)]
    assert figures.BLOCK  # the block syntax this reader follows is the script's
    return found


def test_every_figure_matches_its_data():
    assert _figures().main(["--check"]) == 0, "python tools/figures.py renders the pages again"


def test_no_measured_figure_is_typed_outside_a_block():
    typed = [f"{path.relative_to(ROOT)}:{line}: {figure}"
             for path in _figures().pages() for line, figure in typed_figures(path.read_text())]
    assert not typed, ("measured figures typed by hand (render them from docs/data with "
                       "tools/figures.py, or link docs/results.md):\n" + "\n".join(typed))


def test_the_check_sees_a_typed_figure_and_passes_a_rendered_one():
    page = ("The fast path is 8.75x faster (1.95 ms, ±7%).\n"
            "<!-- figure:cora-fastest -->\nIt is 9.58x faster.\n<!-- /figure:cora-fastest -->\n"
            "The gate's threshold is 3% over 200 epochs.\n")
    assert [figure for _, figure in typed_figures(page)] == ["8.75x", "1.95 ms", "±7%"]


def test_a_stale_figure_is_rendered_again(tmp_path):
    figures = _figures()
    table = figures.figures()
    page = "<!-- figure:cora-fastest -->\nsomething typed\n<!-- /figure:cora-fastest -->\n"
    rendered = figures.render(page, "page.md", table)
    assert "something typed" not in rendered
    assert rendered.splitlines()[1] == table["cora-fastest"]()[0]


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


def test_the_readme_quotes_the_records_rows():
    """Two pages never quote the same figure differently: the README's rows are
    the record's rows, from the one entry."""
    figures = _figures()
    table = figures.figures()
    record = set(table["cora"]())
    excerpt = [line for line in table["readme-cora"]() + table["readme-cora-tta"]()
               if line.startswith("| `")]
    assert excerpt and set(excerpt) <= record


def test_every_record_entry_names_data_that_exists():
    entries = json.loads((ROOT / "docs" / "data" / "record.json").read_text())["entries"]
    missing = [f"{e['key']}: {name}" for e in entries for name in e["data"]
               if not (ROOT / "docs" / "data" / name).is_file()]
    assert not missing
    for entry in entries:  # what a reader needs to trust an entry
        assert {"question", "command", "date", "title"} <= set(entry), entry["key"]
