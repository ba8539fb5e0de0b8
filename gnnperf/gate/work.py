"""The exact work gate: one training step's work metrics of base and head
must be identical; a change names the operators whose counts moved."""
from __future__ import annotations


def op_delta(op_diff: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Calls per step each operator gained (positive) or lost (negative),
    from ``{op: (base, head)}``; the largest change first, then by name."""
    deltas = {op: b - a for op, (a, b) in op_diff.items() if b != a}
    return dict(sorted(deltas.items(), key=lambda item: (-abs(item[1]), -item[1], item[0])))


def compare_work(cases: list[str], base: list[dict | None],
                 head: list[dict | None]) -> list[dict]:
    """One row per case and exact metric: base, head, and whether they match;
    where the per-operator counts differ, one more row with ``op_diff``
    (``{op: (base, head)}``) and ``op_delta`` (:func:`op_delta`: the calls
    per step added and removed). A benchmark only the head has is reported
    as new and does not fail."""
    rows = []
    for case, a, b in zip(cases, base, head):
        if a is None or b is None:
            rows.append({"case": case, "metric": "(benchmark)", "base": "absent" if a is None
                         else "present", "head": "absent" if b is None else "present",
                         "same": a is None and b is None, "new": a is None and b is not None})
            continue
        for name in a["exact"]:
            rows.append({"case": case, "metric": name,
                         "base": a["exact"].get(name), "head": b["exact"].get(name),
                         "same": a["exact"].get(name) == b["exact"].get(name)})
        ops_a, ops_b = a.get("op_counts", {}), b.get("op_counts", {})
        if ops_a != ops_b:
            diff = {op: (ops_a.get(op, 0), ops_b.get(op, 0)) for op in sorted(set(ops_a) | set(ops_b))
                    if ops_a.get(op, 0) != ops_b.get(op, 0)}
            rows.append({"case": case, "metric": "op_counts", "base": None, "head": None,
                         "same": False, "op_diff": diff, "op_delta": op_delta(diff)})
    return rows
