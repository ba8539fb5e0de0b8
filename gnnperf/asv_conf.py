"""The one reader of ``asv.conf.json``: asv's JSON, which allows ``//`` and
``/* */`` comments and trailing commas (asv reads it with json5).

Standard library only where asv is absent: the doctor and ``gnnperf
asv-init`` read a configuration on machines without asv too.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from gnnperf.errors import GnnperfError, first_line


def read_asv_conf(path: Path | str) -> dict:
    r"""The configuration in :obj:`path` as asv reads it: with asv's own
    loader (``asv.util.load_json``, comments allowed) where asv is
    importable, else as JSON with its comments and trailing commas dropped
    (:func:`strip_comments`: a ``//`` inside a string, as in a URL, stays).
    ``"version"`` is kept.

    Args:
        path: The ``asv.conf.json`` file.

    Raises:
        GnnperfError: The file is missing, or not asv's JSON (one line
            naming the file and the parser's complaint).
    """
    path = Path(path)
    if not path.is_file():
        raise GnnperfError(f"{path}: no such file; give the folder or file of an "
                           f"asv.conf.json")
    try:
        from asv.util import load_json
    except ImportError:
        load_json = None
    try:
        if load_json is not None:
            data = load_json(str(path), js_comments=True)
        else:
            data = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    except Exception as exc:  # asv's UserError, json5's and json's ValueError alike
        raise GnnperfError(f"{path} is not valid asv JSON ({first_line(exc)}); "
                           f"fix the file") from None
    if not isinstance(data, dict):
        raise GnnperfError(f"{path} holds {type(data).__name__}, not a JSON object; "
                           f"fix the file")
    return data


def strip_comments(text: str) -> str:
    """:obj:`text` (asv's JSON) without its ``//`` and ``/* */`` comments and
    its trailing commas, strings left whole: a scanner, since a pattern
    over lines cannot tell ``"https://..."`` from a comment."""
    return _outside_strings(_outside_strings(text, _comment), _trailing_comma)


def _comment(text: str, i: int) -> tuple[str, int] | None:
    """A comment at :obj:`i`: what replaces it and where the text goes on."""
    if text.startswith("//", i):
        newline = text.find("\n", i)
        return "", len(text) if newline < 0 else newline
    if text.startswith("/*", i):
        close = text.find("*/", i + 2)
        return " ", len(text) if close < 0 else close + 2
    return None


_CLOSES = re.compile(r"\s*[\]}]")


def _trailing_comma(text: str, i: int) -> tuple[str, int] | None:
    """A comma before a ``]`` or ``}`` (JSON5 allows it, JSON does not)."""
    return ("", i + 1) if text[i] == "," and _CLOSES.match(text, i + 1) else None


def _outside_strings(text: str, edit) -> str:
    """:obj:`text` with :obj:`edit` applied at every position outside JSON
    strings: ``edit(text, i)`` gives (replacement, next index) or None."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i:end + 1])
            i = end + 1
            continue
        edited = edit(text, i)
        if edited is None:
            out.append(text[i])
            i += 1
        else:
            out.append(edited[0])
            i = edited[1]
    return "".join(out)


__all__ = ["read_asv_conf", "strip_comments"]
