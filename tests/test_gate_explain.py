"""The gate explains a change: the ops a work change added and removed, and
for a time change with the work unchanged, what moved (the ops' self time
from a profile of each arm's step, whether the shift is common to every
case, the per-op overhead of each arm's environment). Timing figures are
never asserted here: only that the pieces are there and computed right."""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest

from gnnperf import gate
from gnnperf.cli import main
from gnnperf.gate import faults

ROOT = Path(__file__).resolve().parents[1]
SMALL = "synthetic:nodes=300,degree=4,features=8,classes=3"


@pytest.fixture(scope="module")
def extra_op_gate(tmp_path_factory):
    """``gnnperf gate --no-time`` of a head with one injected op per step
    against the same tree without it: exit status, text, Markdown, JSON."""
    from gnnperf.gate import explain
    tmp = tmp_path_factory.mktemp("explain")
    same = gate.copy_tree(ROOT, tmp / "same")
    extra = gate.copy_tree(ROOT, tmp / "extra")
    faults.inject(extra, "extra-op", "baseline")
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)
    try:  # short profiles: what is checked here is counts, not times
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                pytest.MonkeyPatch.context() as patch:
            patch.setattr(explain, "ROUNDS", 3)
            patch.setattr(explain, "PROFILE_MS", 20.0)
            code = main(["gate", "--no-time", "--variants", "baseline", "--datasets", SMALL,
                         "--base-dir", str(same), "--head-dir", str(extra), "--quiet",
                         "--json", str(tmp / "gate.json"), "--markdown", str(tmp / "gate.md")])
    finally:
        os.chdir(here)
    return (code, out.getvalue() + err.getvalue(), (tmp / "gate.md").read_text(),
            json.loads((tmp / "gate.json").read_text()))


# ----------------------------------------------------------------- a work change
def test_a_work_change_names_the_ops_added_per_step(extra_op_gate):
    code, text, markdown, document = extra_op_gate
    case = f"baseline@{SMALL}"
    assert code == 1, text
    assert "+1 aten.add" in text  # the op the head added, signed, per step
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {case}"))
    assert "+1 `aten.add`" in row
    diff = next(r for r in document["work"]["rows"] if "op_diff" in r)
    assert diff["op_delta"] == {"aten.add": 1}


def test_a_work_change_is_profiled_in_both_arms(extra_op_gate):
    # A work change is something to explain: both arms' steps are profiled,
    # the profile sees the extra call, and the JSON keeps to its schema.
    import jsonschema
    from gnnperf.schemas import schema
    _, text, markdown, document = extra_op_gate
    case = f"baseline@{SMALL}"
    jsonschema.validate(document, schema("gate"))
    section = document["explain"]
    assert section["cases"] == [case]
    adds = {arm: section["profiles"][case][arm]["ops"]["aten::add"]["calls"]
            for arm in ("base", "head")}
    assert adds["head"] == adds["base"] + 1
    assert any(row["op"] == "aten::add" for row in section["ops"][case])
    for arm in ("base", "head"):
        assert section["overhead"][arm]["add_ns"] > 0
    assert "== what moved" in text and "per-op overhead" in text
    assert "#### What moved" in markdown


# ----------------------------------------------------------------- the pieces
def _verdict(case, ratio, half, pairs=6, base_s=1e-3):
    return {"case": case, "ratio": ratio, "ci_low": ratio - half, "ci_high": ratio + half,
            "pairs": pairs, "base_median_s": base_s, "head_median_s": base_s * ratio,
            "verdict": "REGRESSION" if ratio - half > 1.03 else "same"}


def test_ratios_alike_within_their_intervals_are_one_common_shift():
    from gnnperf.gate.explain import group_ratios
    verdicts = [_verdict(f"v{i}@g", r, 0.004)
                for i, r in enumerate((1.029, 1.031, 1.030, 1.0305, 1.028))]
    found = group_ratios(verdicts)
    assert found["shift"] == "common"
    assert len(found["groups"]) == 1 and len(found["groups"][0]["cases"]) == 5
    assert 1.028 < found["groups"][0]["ratio"] < 1.031
    # Wide intervals: a 4% gap that the pairs cannot resolve is no second cause.
    loose = group_ratios([_verdict("a@g", 1.01, 0.06), _verdict("b@g", 1.05, 0.06)])
    assert loose["shift"] == "common"


def test_two_groups_of_ratios_are_particular_and_grouped():
    from gnnperf.gate.explain import group_ratios
    verdicts = ([_verdict(f"a{i}@g", r, 0.004) for i, r in enumerate((1.029, 1.031, 1.030))]
                + [_verdict(f"b{i}@g", r, 0.005) for i, r in enumerate((1.101, 1.098))])
    found = group_ratios(verdicts)
    assert found["shift"] == "particular"
    assert [sorted(g["cases"]) for g in found["groups"]] == [["a0@g", "a1@g", "a2@g"],
                                                             ["b0@g", "b1@g"]]
    assert found["p_common"] < 0.01


def test_a_common_per_op_cost_is_told_from_a_common_factor():
    # One cost per op (dispatch): each case's step grows by the same ns per
    # ATen op, so its ratio depends on its op density. No common factor fits,
    # one per-op cost does.
    from gnnperf.gate.explain import group_ratios
    ops = {"a@g": 100, "b@g": 200, "c@g": 400}
    verdicts = [_verdict(case, 1 + n * 100e-9 / 1e-3, 0.002) for case, n in ops.items()]
    found = group_ratios(verdicts, ops)
    assert found["shift"] == "particular"
    assert found["per_op"]["fits"] and found["per_op"]["ns_per_op"] == pytest.approx(100, rel=0.02)
    assert group_ratios(verdicts[:1])["shift"] == "one case"


def test_self_time_diff_names_the_ops_that_moved_most():
    from gnnperf.gate.explain import self_time_diff

    def profile(ops):
        return {"steps": 10, "wall_us": 500.0,
                "ops": {name: {"self_us": us, "calls": calls} for name, (us, calls) in ops.items()}}

    base = profile({"aten::mm": (100.0, 4), "aten::add": (20.0, 6), "aten::relu": (9.0, 2),
                    "aten::sum": (3.0, 1)})
    head = profile({"aten::mm": (130.0, 4), "aten::add": (21.0, 6), "aten::relu": (9.0, 2),
                    "aten::mul": (5.0, 1)})
    rows = self_time_diff(base, head, top=3)
    assert [r["op"] for r in rows] == ["aten::mm", "aten::mul", "aten::sum"]
    assert rows[0]["delta_us"] == pytest.approx(30.0) and rows[0]["ratio"] == pytest.approx(1.3)
    assert rows[1]["base_us"] == 0 and rows[1]["ratio"] is None  # new in the head
    assert (rows[1]["base_calls"], rows[1]["head_calls"]) == (0, 1)
    assert rows[2]["delta_us"] == pytest.approx(-3.0)


def test_paired_rounds_give_the_change_and_how_many_rounds_agree():
    # A slow spell of a shared machine falls on both profiles of a round:
    # the change is the median of the rounds' own differences, and the
    # rounds that agree on its sign say whether chance could have made it.
    from gnnperf.gate.explain import consistent_from, median_profile, self_time_diff

    def profile(mm_us):
        return {"steps": 4, "wall_us": 200.0, "cpu_us": 200.0,
                "ops": {"aten::mm": {"self_us": mm_us, "calls": 2}}}

    slow_spells = [1.0, 1.0, 2.0, 1.0, 2.0]  # the machine's speed round by round
    paired = [(profile(100 * s), profile(110 * s)) for s in slow_spells]
    base = median_profile([a for a, _ in paired])
    head = median_profile([b for _, b in paired])
    row = self_time_diff(base, head, paired=paired)[0]
    assert row["delta_us"] == pytest.approx(10.0) and row["ratio"] == pytest.approx(1.1)
    assert (row["agree"], row["rounds"]) == (5, 5)
    assert consistent_from(15) == 13 and consistent_from(5) == 6  # 5 rounds never suffice


def test_a_passing_gate_profiles_nothing():
    from gnnperf.gate.explain import to_explain
    same = [_verdict("a@g", 1.001, 0.01), _verdict("b@g", 0.999, 0.01)]
    rows = [{"case": "a@g", "metric": "aten_ops", "base": 5, "head": 5, "same": True}]
    assert to_explain(same, rows, force=False) == []
    assert to_explain(same, rows, force=True) == ["a@g", "b@g"]
    slower = same + [_verdict("c@g", 1.2, 0.01), dict(_verdict("e@g", 0.8, 0.01),
                                                      verdict="improvement")]
    assert to_explain(slower, rows, force=False) == ["c@g"]  # an improvement passes
    changed = rows + [{"case": "d@g", "metric": "op_counts", "base": None, "head": None,
                       "same": False, "op_diff": {"aten.add": (1, 2)}}]
    assert to_explain(same, changed, force=False) == ["d@g"]


def test_the_per_op_overhead_is_measured_in_the_arms_environment():
    from gnnperf.gate.arms import Arm
    from gnnperf.gate.explain import profile_arms
    # No case to profile: the explanation's own worker measures the overhead alone.
    _, overhead, failed, _ = profile_arms({"arm": Arm(ROOT, sys.executable)}, [], rounds=3)
    found = overhead["arm"]
    assert failed == {}
    assert found["add_ns"] > 0 and found["empty_ns"] > 0
    assert found["torch"]  # the arm's own torch says it
