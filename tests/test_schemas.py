"""The JSON of ``gnnperf run``, ``gate`` and ``sampler`` against the JSON
Schemas the package ships (gnnperf/schemas): real outputs, so a refactor
that renames, drops or retypes a field fails here, not in a user's script."""
import json
import math
import random
import tomllib
from pathlib import Path

import jsonschema
import pytest

from gnnperf.cli import main
from gnnperf.schemas import SCHEMA_VERSION, schema

ROOT = Path(__file__).resolve().parent.parent
GRAPH = "synthetic:nodes=600,degree=4,features=16,classes=3"


def _valid(name: str, document: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema(name))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(document)]
    assert not errors, errors[:5]
    assert document["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize("name", ["run", "gate", "sampler"])
def test_each_schema_is_a_valid_json_schema_and_ships_with_the_package(name):
    jsonschema.Draft202012Validator.check_schema(schema(name))
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["gnnperf"]
    assert any((ROOT / "gnnperf").glob(pattern) and Path(f"schemas/{name}.json").match(pattern)
               for pattern in package_data)


def test_run_json_matches_its_schema(tmp_path, capsys):
    out = tmp_path / "run.json"
    # warm-up 3: the roofline figures are numbers; a model that cannot run
    # sparse makes an n/a row.
    assert main(["run", "--dataset", GRAPH, "--epochs", "4", "--warmup", "3", "--no-progress",
                 "--variants", "baseline,sparse", "--model", "gcn,gat",
                 "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["unavailable"] and document["results"][0]["roofline"]
    _valid("run", document)
    # The schema holds the fields: one renamed is refused.
    document["result"] = document.pop("results")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema("run"))


def test_sampler_json_matches_its_schema(tmp_path, capsys):
    out = tmp_path / "sampler.json"
    assert main(["sampler", "--dataset", GRAPH, "--batch-size", "64", "--batches", "2",
                 "--json", str(out)]) == 0
    _valid("sampler", json.loads(out.read_text()))


def _fake_time_workers(arms, cases, processes, rounds, sample_ms, progress=None,
                       pin_cpus=True, **kwargs):
    """The time gate's worker pairs, stood in for: equal arms with a little
    noise (the timing itself is tests/test_gate.py's)."""
    rng = random.Random(0)
    times = {c.name: {a: {"cpu": [], "wall": []} for a in arms} for c in cases}
    for case in cases:
        for _ in range(processes):
            base = [0.01 * math.exp(rng.gauss(0, 0.01)) for _ in range(rounds)]
            head = [t * math.exp(rng.gauss(0, 0.005)) for t in base]
            for clock in ("cpu", "wall"):
                times[case.name]["base"][clock].append(base)
                times[case.name]["head"][clock].append(head)
    return [1] * len(cases), times


def test_gate_json_matches_its_schema(tmp_path, monkeypatch, capsys):
    # The work gate runs its real workers (both arms this tree); the time
    # gate's sections come from its own code on stand-in samples.
    import gnnperf.gate.arms
    monkeypatch.setattr(gnnperf.gate.arms, "run_arms", _fake_time_workers)
    out = tmp_path / "gate.json"
    assert main(["gate", "--variants", "baseline", "--datasets", GRAPH, "--base-dir", str(ROOT),
                 "--head-dir", str(ROOT), "--processes", "3", "--max-processes", "3",
                 "--rounds", "5", "--quiet", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["work"]["rows"] and document["time"]["verdicts"]
    _valid("gate", document)
