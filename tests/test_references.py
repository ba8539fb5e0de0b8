"""Every file of this repository that the code, the tests or the docs name
exists: a path such as ``gnnperf/measure/case.py`` or ``docs/asv.md`` in a
tracked source, test, doc, workflow or config file must be a file (or
folder) of the checkout, so a rename or a deletion cannot leave a pointer to
nothing behind."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The repository's top-level folders a reference starts from.
TOP = ("gnnperf", "benchmarks", "tests", "tools", "docs", ".github", ".ci")
#: A path below one of them, ending in a file type; not the tail of a longer
#: path (``../shared/tools/x.py`` names another checkout's file).
REFERENCE = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:py|md|ya?ml|json|toml|sh|txt|cfg))\b"
                       % "|".join(re.escape(top) for top in TOP))
SCANNED = (".py", ".md", ".yml", ".yaml", ".toml", ".cfg", ".json", ".sh", "")
#: References to fix in files whose owners are rewriting them: each must still be missing, so an entry goes
#: as soon as its file exists or the reference is gone (a ratchet, never an
#: allowance for new ones).
PENDING: set[tuple[str, str]] = set()


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    files = [ROOT / name for name in out.stdout.decode().split("\0") if name]
    return [f for f in files if f.suffix in SCANNED and f.is_file()
            and (f.suffix or f.parent.name == ".ci") and f != Path(__file__).resolve()]


def test_every_file_the_repository_names_exists():
    missing, pending = [], set()
    for path in _tracked():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in REFERENCE.finditer(line):
                if (ROOT / match.group(1)).exists():
                    continue
                where = str(path.relative_to(ROOT))
                if (where, match.group(1)) in PENDING:
                    pending.add((where, match.group(1)))
                else:
                    missing.append(f"{where}:{number}: {match.group(1)}")
    assert not missing, "references to files that do not exist:\n" + "\n".join(missing)
    assert pending == PENDING, f"fixed, so remove from PENDING: {sorted(PENDING - pending)}"


def test_the_check_sees_a_missing_file(tmp_path):
    line = "see tools/ab_gate.py and gnnperf/measure/case.py, not ../shared/tools/x.py"
    assert [m.group(1) for m in REFERENCE.finditer(line)] == ["tools/ab_gate.py",
                                                             "gnnperf/measure/case.py"]


def test_nothing_a_reader_reads_names_an_issue_number():
    """Code, docstrings, tests, README and guides say what the code does and
    why; "issue 47" is a page no reader of the product can open (git keeps
    the history). The measured data in docs/data is a record, not prose."""
    pattern = re.compile(r"\bissue\s+#?\d+", re.IGNORECASE)
    found = [f"{path.relative_to(ROOT)}:{n}"
             for path in _tracked() if "docs/data" not in path.relative_to(ROOT).as_posix()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if pattern.search(line)]
    assert found == [], found


#: A commit hash: 7 to 40 hex digits, letters and digits both. A time of day:
#: hours and minutes, as a lab notebook stamps its runs.
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
MINUTE = re.compile(r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b(?!:)")


def _prose_and_code() -> list[Path]:
    """README, the guides and the product's code: what a reader reads as the
    present (the record, docs/results.md and docs/data, dates its entries)."""
    keep = ("gnnperf/", "benchmarks/", "tools/", "docs/", "README.md")
    return [p for p in _tracked() if p.relative_to(ROOT).as_posix().startswith(keep)
            and p.suffix in (".py", ".md", ".sh")
            and not p.relative_to(ROOT).as_posix().startswith(("docs/data", "docs/results.md"))]


def _stamps(text: str) -> list[tuple[int, str]]:
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        # A pinned action's commit is a pin a workflow needs, not a reference to history.
        line = re.sub(r"\"actions/[\w-]+\",\s*\"[0-9a-f]{40}\"|\"[0-9a-f]{40}\", \"v[\d.]+\"", "", line)
        found += [(n, m.group(0)) for m in COMMIT.finditer(line)]
        found += [(n, m.group(0)) for m in MINUTE.finditer(line)]
    return found


def test_no_commit_hash_or_minute_stamp_in_readme_guides_or_code():
    found = [f"{path.relative_to(ROOT)}:{n}: {stamp}" for path in _prose_and_code()
             for n, stamp in _stamps(path.read_text(errors="replace"))]
    assert found == [], "say what the code does now; git keeps when:\n" + "\n".join(found)


def test_the_stamp_check_sees_a_hash_and_a_minute():
    text = ("measured at 05:41 on 84b955b\n"
            '    "checkout": ("actions/checkout", "11d5960a326750d5838078e36cf38b85af677262", "v4.4.0"),\n'
            "a 3:1 split at 300 s, cafe, 1e7, deadbeef\n")
    assert _stamps(text) == [(1, "84b955b"), (1, "05:41")]
