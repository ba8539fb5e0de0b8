"""The JSON Schemas (draft 2020-12) of what ``gnnperf run``, ``gnnperf
gate`` and ``gnnperf sampler`` write with ``--json``: ``run.json``,
``gate.json`` and ``sampler.json`` beside this file. Each document carries
``schema_version``; a change that renames or removes a field, or changes
its meaning, raises it (tests/test_schemas.py validates real outputs)."""
from __future__ import annotations

import json
from importlib import resources

#: The version of every document's format.
SCHEMA_VERSION = 2


def schema(name: str) -> dict:
    """The schema of ``name`` (``run``, ``gate`` or ``sampler``)."""
    return json.loads(resources.files(__name__).joinpath(f"{name}.json").read_text())
