"""Injected regressions, for showing that a gate catches them: patches a
*copy* of a tree so every training step of a variant does more work. The
product code has no switch for this; the patch is appended to the copy's
variant registry (``gnnperf/variants/__init__.py``), which every gnnperf
checkout has, and wraps ``Variant.build``.

Used by the gate's sensitivity study, ``gnnperf bisect``'s tests, the asv
gate demo and the gate's tests.
"""
from __future__ import annotations

from pathlib import Path

PATCHED_FILE = "gnnperf/variants/__init__.py"

KINDS = ("extra-op", "slowdown")

_TEMPLATE = '''

# ---- injected by gnnperf.faults ({kind}; temporary copy only) ----
def _injected_fault_build(build, target={target!r}, kind={kind!r}, amount={amount!r}):
    import time as _time

    def faulty_build(self, data, config, device):
        run = build(self, data, config, device)
        if target is None or self.name == target:
            step = run.step

            def faulty_step(batch):
                start = _time.process_time()
                loss = step(batch)
                if kind == "extra-op":
                    loss.add(1.0)  # one more ATen call and a 4-byte allocation
                else:
                    # Calibrated extra CPU work: this fraction of the step's own CPU time.
                    deadline = _time.process_time() + amount * (_time.process_time() - start)
                    while _time.process_time() < deadline:
                        pass
                return loss

            run.step = faulty_step
        return run

    return faulty_build


Variant.build = _injected_fault_build(Variant.build)
'''


def fault_patch(kind: str, variant: str | None = None, amount: float = 0.0) -> str:
    """The patch text: ``extra-op`` (one more tensor op per step) or
    ``slowdown`` (extra CPU work equal to :obj:`amount` times the step's own,
    self-calibrating whatever the machine's load), for :obj:`variant` only
    or every variant (``None``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown fault {kind!r}; use one of {', '.join(KINDS)}")
    if kind == "slowdown" and not amount > 0:
        raise ValueError("a slowdown needs amount > 0 (0.05 is +5%)")
    return _TEMPLATE.format(kind=kind, target=variant, amount=float(amount))


def inject(tree: Path, kind: str, variant: str | None = None, amount: float = 0.0) -> str:
    """Appends :func:`fault_patch` to :obj:`tree`'s variant registry; returns
    the patch."""
    if variant is not None:  # the registry's spelling ("amp+compiled" for "compiled+amp")
        from gnnperf.variants import get_variant
        variant = get_variant(variant).name
    patch = fault_patch(kind, variant, amount)
    with open(Path(tree) / PATCHED_FILE, "a") as registry:
        registry.write(patch)
    return patch


__all__ = ["KINDS", "PATCHED_FILE", "fault_patch", "inject"]
