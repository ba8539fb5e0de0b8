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
