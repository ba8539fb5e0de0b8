"""The README and the guides stay true to the code: every ``gnnperf`` command
they show parses with the real parser, every relative link opens a file (and
a heading, where it names one), and a newcomer's tasks are at most two clicks
from the README."""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import itertools
import re
import shlex
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
SPAN = re.compile(r"(?<!`)(`+)\s*(gnnperf\s.*?)\s*\1(?!`)")
#: A value that stands for the reader's own: ``<ref>``, ``$(git rev-parse
#: HEAD)``, ``"$BASE"``, ``FILE``, ``0.05,...``.
PLACEHOLDER = re.compile(r"<[^>]*>|\$|^[A-Z][A-Z0-9_]*$|\.\.\.|…")
#: Words that stand for options not shown: ``gnnperf gate ...``, ``[options]``.
ELISION = re.compile(r"^(\.\.\.|…|\[.*|.*\])$")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def _markdown(text: str) -> list[tuple[int, str, bool]]:
    """:obj:`text`'s lines as ``(number, line, in_code_block)``; a fence
    line counts as code."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        fence = bool(FENCE.match(line))
        fenced ^= fence
        lines.append((number, line, fenced or fence))
    return lines


@functools.cache
def _lines(path: Path) -> list[tuple[int, str, bool]]:
    return _markdown(path.read_text())


def gnnperf_commands(lines: list[tuple[int, str, bool]]) -> list[tuple[int, list[str], bool]]:
    """Every ``gnnperf`` command in a page, as ``(line, arguments, is_fragment)``.

    In a code block a command starts a line (after an optional ``$ `` and
    environment assignments), follows ``&&``, ``||``, ``;`` or ``|``, or is
    run by another command (``-m gnnperf``, ``-- gnnperf``); ``\\`` continuations are joined,
    ``# comments`` and redirections dropped. Inline code spans `` `gnnperf
    ...` `` are commands too, quoted in prose: fragments.

    Args:
        lines: a page's lines, as :func:`_lines` gives them.

    Returns:
        The commands, their arguments after ``gnnperf`` split as a shell
        splits them.
    """
    found = [(number, _split(span)[1:], True) for number, span in _spans(lines)]
    pending = None
    for number, text, code in lines:
        if not code:
            continue
        if pending is not None:
            text = pending[1] + " " + text.strip()
            number = pending[0]
        if text.rstrip().endswith("\\"):
            pending = (number, text.rstrip()[:-1])
            continue
        pending = None
        if "gnnperf" not in text or FENCE.match(text):
            continue
        words = _split(text)
        command: list[str] = []
        for word in words + [";"]:
            if not word.strip(";&|"):  # a separator: the command before it ends
                # gnnperf itself, or run by another command: `torchrun ... -m
                # gnnperf run`, `python -m gnnperf`, `under_load.py -- gnnperf`.
                starts = [i for i, w in enumerate(command)
                          if w == "gnnperf" and (i == 0 or command[i - 1] in ("-m", "--"))]
                if starts:
                    found.append((number, command[starts[0] + 1:], False))
                command = []
            elif not (command == [] and (word == "$" or re.match(r"^\w+=", word))):
                command.append(word)
    return [(number, _before_redirection(words), fragment)
            for number, words, fragment in sorted(found, key=lambda command: command[0])]


def _spans(lines: list[tuple[int, str, bool]]) -> list[tuple[int, str]]:
    """The inline code spans `` `gnnperf ...` `` of a page's prose, a span
    wrapped over two lines included, as ``(line it starts on, its text)``."""
    found, paragraph = [], []
    for number, text, code in lines + [(0, "", True)]:
        if text.strip() and not code:
            paragraph.append((number, text))
            continue
        joined, starts = "", []
        for line_number, line in paragraph:
            starts.append((len(joined), line_number))
            joined += line + " "
        for span in SPAN.finditer(joined):
            found.append((max(s for s in starts if s[0] <= span.start())[1], span.group(2)))
        paragraph = []
    return found


def _split(text: str) -> list[str]:
    # $(git rev-parse HEAD) and <venv of 2.4.0> are one value each: their
    # spaces would split them.
    text = re.sub(r"\$\([^()]*\)|<\w[^<>]*\w>", lambda m: m.group(0).replace(" ", "_"), text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: not a shell line
        return []


def _before_redirection(words: list[str]) -> list[str]:
    for index, word in enumerate(words):
        if re.match(r"^\d*>", word):
            return words[:index]
    return words


@functools.cache
def _parser(fragment: bool) -> argparse.ArgumentParser:
    """gnnperf's parser, taking placeholders for values; for a fragment,
    with nothing required and an option's value optional."""
    from gnnperf.cli import build_parser
    parser = build_parser()
    pending = [parser]
    while pending:
        current = pending.pop()
        current.allow_abbrev = False  # `--mod` for `--model` breaks when `--models` comes
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending += action.choices.values()
                action.required = action.required and not fragment
                continue
            action.type = _taking_placeholders(action.type or str)
            if action.choices is not None:
                action.choices = _Choices(action.choices)
            if fragment:
                action.required = False
                if action.nargs is None:
                    action.nargs = "?"
        if fragment:
            for group in current._mutually_exclusive_groups:
                group.required = False
    return parser


def _is_placeholder(value) -> bool:
    return isinstance(value, str) and bool(PLACEHOLDER.search(value))


def _taking_placeholders(convert):
    @functools.wraps(convert)
    def converted(text: str):
        return text if _is_placeholder(text) else convert(text)
    return converted


class _Choices(list):
    def __contains__(self, value) -> bool:
        return _is_placeholder(value) or super().__contains__(value)


def parse_error(arguments: list[str], fragment: bool) -> str | None:
    """argparse's complaint about ``gnnperf <arguments>``, or None when it
    parses. A fragment is parsed with nothing required and elided words
    (:obj:`ELISION`) ignored."""
    fragment = fragment or any(ELISION.match(word) for word in arguments)
    parser = _parser(fragment)
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint), contextlib.redirect_stdout(io.StringIO()):
            _, extra = parser.parse_known_args(arguments)
    except SystemExit as error:
        return None if error.code == 0 else complaint.getvalue().strip()  # 0: --help
    unknown = [word for word in extra if not (fragment and ELISION.match(word))]
    return f"gnnperf: error: unrecognized arguments: {' '.join(unknown)}" if unknown else None


def bad_commands(path_name: str, lines: list[tuple[int, str, bool]]) -> list[str]:
    """``file:line: command`` and argparse's complaint for each command of a
    page that does not parse (:func:`parse_error`)."""
    bad = []
    for number, arguments, fragment in gnnperf_commands(lines):
        if arguments[:1] and (PLACEHOLDER.search(arguments[0]) or ELISION.match(arguments[0])):
            continue  # `gnnperf <command> --help`: no command to check
        # `gnnperf results select|seed` in prose: each alternative is a command.
        alternatives = itertools.product(*(word.split("|") if fragment else [word]
                                           for word in arguments))
        for error in {parse_error(list(words), fragment) for words in alternatives} - {None}:
            bad.append(f"{path_name}:{number}: gnnperf {shlex.join(arguments)}\n    {error}")
    return bad


def test_every_gnnperf_command_line_in_the_docs_parses():
    """Every ``gnnperf`` command in README.md and docs/*.md parses with
    ``gnnperf.cli.build_parser()``. Placeholders (``<ref>``, ``FILE``,
    ``$VAR``, ``$(git rev-parse HEAD)``, ``...`` as a value) are values, so a
    number or a choice can be one.

    The rule: a command in a code block is a line a reader runs, so it must
    parse whole, required options and arguments included. A command quoted
    in prose (an inline code span) is a fragment, and so is a code line with
    an elision (``...``, ``…``, ``[options]``: options not shown): only an
    unknown command, an unknown flag, an invalid choice or a value its type
    refuses fails it, not a missing required option or value. A command
    written as a placeholder (``gnnperf <command>``) is not checked.
    """
    bad = [line for page in PAGES
           for line in bad_commands(str(page.relative_to(ROOT)), _lines(page))]
    assert not bad, "gnnperf commands in the docs that do not parse:\n" + "\n".join(bad)


def test_the_check_sees_a_bad_flag():
    page = _markdown("Run `gnnperf gate --base-python X --head-python Y` first.\n\n"
                     "```bash\n"
                     "$ gnnperf doctor\n"
                     "gnnperf run --model gcn \\\n    --epocs 3   # a typo\n"
                     "git fetch && gnnperf gate --clock sun\n"
                     "gnnperf asv-init --repo . | tee log\n"
                     "gnnperf bisect ... --metric time\n"
                     "torchrun --nproc-per-node 2 -m gnnperf run --world-sizes 2\n"
                     "python tools/under_load.py --cpu 1 -- gnnperf doctor --skip-asv\n"
                     "```\n"
                     "Quoted: `gnnperf asv-init --repo x`, `gnnperf sampler --fast`, "
                     "`gnnperf gate ...`, `gnnperf results select\\|store`; wrapped: `gnnperf\n"
                     "roofs --jsn x`.\n")
    bad = bad_commands("page.md", page)
    assert [line.split("\n")[0] for line in bad] == [
        "page.md:5: gnnperf run --model gcn --epocs 3",
        "page.md:7: gnnperf gate --clock sun",
        "page.md:8: gnnperf asv-init --repo .",
        "page.md:10: gnnperf run --world-sizes 2",
        "page.md:13: gnnperf sampler --fast",
        "page.md:13: gnnperf roofs --jsn x"]
    assert "unrecognized arguments: --epocs 3" in bad[0]
    assert "invalid choice: 'sun'" in bad[1]
    assert "required: --out" in bad[2]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (code and link markup
    dropped) lowercased, punctuation other than ``-`` and ``_`` dropped,
    spaces turned to ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> set[str]:
    """The anchors of a page: its headings' slugs (a repeated one gets
    ``-1``, ``-2``, ... as on GitHub) and its HTML ``<a id=...>``."""
    seen: Counter[str] = Counter()
    found = set()
    for _, text, code in _lines(path):
        found.update(HTML_ANCHOR.findall(text))
        heading = HEADING.match(text)
        if heading and not code:
            name = slug(heading.group(1))
            found.add(f"{name}-{seen[name]}" if seen[name] else name)
            seen[name] += 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The relative links of a page (outside code) as ``(line, target)``."""
    found = []
    for number, text, code in _lines(path):
        if code:
            continue
        text = re.sub(r"(`+).*?\1", "", text)
        targets = LINK.findall(text) + REFERENCE_LINK.findall(text)
        found += [(number, target) for target in targets
                  if not re.match(r"^[a-z][a-z+.-]*:", target)]  # http:, mailto:
    return found


def _linked(path: Path, target: str) -> Path:
    file = target.partition("#")[0]
    return (path.parent / file).resolve() if file else path


def broken(path: Path, target: str) -> str | None:
    """Why :obj:`target`, linked from :obj:`path`, opens nothing; None when it opens."""
    linked, anchor = _linked(path, target), target.partition("#")[2]
    if not linked.exists():
        return "no such file"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"no heading #{anchor} in {linked.relative_to(ROOT)}"
    return None


def test_every_link_in_readme_and_guides_resolves():
    bad = [f"{page.relative_to(ROOT)}:{number}: {target}: {why}"
           for page in PAGES for number, target in links(page)
           if (why := broken(page, target))]
    assert not bad, "links that open nothing:\n" + "\n".join(bad)


def test_the_link_check_sees_a_broken_anchor():
    readme = ROOT / "README.md"
    assert slug("The `gate`: base vs. head (CI)") == "the-gate-base-vs-head-ci"
    heading = min(anchors(ROOT / "docs" / "ci-gate.md"))
    assert broken(readme, f"docs/ci-gate.md#{heading}") is None
    assert broken(readme, "docs/ci-gate.md#no-such-heading") == \
        "no heading #no-such-heading in docs/ci-gate.md"
    missing = "docs/" + "no-such-page.md"  # split: no file reference for tests/test_references.py
    assert broken(readme, missing) == "no such file"


#: A newcomer's task and what the page that answers it shows.
TASKS = {"add gnnperf to a repository's CI": ("gnnperf adopt",),
         "publish the results pages": ("asv publish", "gnnperf results"),
         "check a PyTorch or PyG upgrade": ("--base-python",),
         "benchmark your own model": ("--model",)}


def test_a_newcomers_tasks_are_two_clicks_from_the_readme():
    """Each task has a page one or two clicks from the README that shows its
    command; the README's own summary does not count. A click is a relative
    link to a Markdown page, with or without an anchor, that opens: a link
    whose anchor names no heading of its page is not followed."""
    readme = ROOT / "README.md"
    reached, frontier = set(), [readme]
    for _ in range(2):
        frontier = [_linked(page, target) for page in frontier for _, target in links(page)
                    if broken(page, target) is None and _linked(page, target).suffix == ".md"
                    and _linked(page, target) not in reached | {readme}]
        reached.update(frontier)
    missing = [task for task, commands in TASKS.items()
               if not any(command in page.read_text() for page in reached for command in commands)]
    assert not missing, (f"no page within two clicks of the README shows how to: {missing} "
                         f"(reached: {sorted(str(p.relative_to(ROOT)) for p in reached)})")


def _gpu_check_plans() -> int:
    import sys
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from gpu_check.plan import PLANS
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return len(PLANS)


def _xdist_workers() -> int:
    import tomllib
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    return int(re.search(r"-n (\d+)", addopts)[1]) if isinstance(addopts, str) else \
        int(addopts[addopts.index("-n") + 1])


#: Each count the docs state, and where the code keeps it.
COUNTS = {
    ("README.md", r"on (\w+) pytest-xdist workers"): _xdist_workers,
    ("docs/testing.md", r"(\w+) pytest-xdist workers"): _xdist_workers,
    ("docs/gpu-runner.md", r"split the check into (\w+) commands"): _gpu_check_plans,
    ("docs/workflows.md", r"the (\w+) workflows below"):
        lambda: len(list((ROOT / "gnnperf" / "ci" / "templates").glob("*.yml"))),
}
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def test_the_counts_the_docs_state_are_the_codes():
    for (page, phrase), count in COUNTS.items():
        found = re.findall(phrase, (ROOT / page).read_text())
        assert found, f"{page} no longer says {phrase!r}: drop it from COUNTS"
        for word in found:
            assert WORDS.get(word, word) in (count(), str(count())), (page, word, count())


def test_the_readme_and_the_guides_stay_short():
    """The README is a front door and the guides answer a reader's task; the
    measured record (docs/results.md) is rendered, and long where it must be."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
    guides = [p for p in (ROOT / "docs").glob("*.md") if p.name != "results.md"]
    assert sum(len(p.read_text().splitlines()) for p in guides) <= 1500
