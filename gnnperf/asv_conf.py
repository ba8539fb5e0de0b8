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
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = len(text) if close < 0 else close + 2
            out.append(" ")
        else:
            out.append(text[i])
            i += 1
    return _drop_trailing_commas("".join(out))


def _string_end(text: str, start: int) -> int:
    """The index after the JSON string that opens at :obj:`start`."""
    i = start + 1
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


_CLOSES = re.compile(r"\s*[\]}]")


def _drop_trailing_commas(text: str) -> str:
    """:obj:`text` (comments already gone) without a comma before a ``]``
    or ``}``, which JSON5 allows and JSON does not."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
            continue
        if text[i] != "," or not _CLOSES.match(text, i + 1):
            out.append(text[i])
        i += 1
    return "".join(out)


__all__ = ["read_asv_conf", "strip_comments"]
