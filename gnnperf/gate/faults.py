"""Injected regressions, for showing that a gate catches them: patches a
*copy* of a tree so every training step of a variant does more work. The
product code has no switch for this; the patch is appended to the copy's
variant registry (``gnnperf/variants/__init__.py``), which every gnnperf
checkout has, and wraps ``Variant.build``.

Kinds: ``extra-op`` (one more tensor op per step: the exact work gate's
test), ``slowdown`` (calibrated extra CPU time: the time gate's), ``nan``
(from step :obj:`amount` on, 1-based, the parameters are NaN: numerics that
broke, which must fail the variant rather than time NaN arithmetic) and
``crash`` (building the variant raises, or with :obj:`amount` k its step k
and later ones: a commit whose variant is broken, which must show as failed,
never as n/a) and ``unavailable`` (building it
raises gnnperf's declared "cannot here", as a missing optional dependency
does: n/a, never failed) and ``copy-input`` (every step allocates a copy of
the graph's features: an allocation-bound step, the sensitivity study's
scratch change applied to both arms).

Used by the gate's sensitivity study, ``gnnperf bisect``'s tests, the asv
gate demo and the gate's tests.
"""
from __future__ import annotations

from pathlib import Path

PATCHED_FILE = "gnnperf/variants/__init__.py"

KINDS = ("extra-op", "slowdown", "nan", "crash", "unavailable", "copy-input")

_TEMPLATE = '''

# ---- injected by gnnperf.gate.faults ({kind}; temporary copy only) ----
def _injected_fault_build(build, target={target!r}, kind={kind!r}, amount={amount!r}):
    import time as _time

    def faulty_build(self, data, config, device):
        if kind == "crash" and not amount and (target is None or self.name == target):
            raise RuntimeError(f"injected crash while building {{self.name}}")
        if kind == "unavailable" and (target is None or self.name == target):
            try:  # a declared "cannot here", as a missing optional dependency raises it
                from gnnperf.errors import Unavailable as _Unavailable
            except ImportError:  # trees before the declared reasons
                from gnnperf.errors import GnnperfError as _Unavailable
            raise _Unavailable(f"{{self.name}} needs an injected missing module: pip install it")
        run = build(self, data, config, device)
        if target is None or self.name == target:
            step = run.step
            steps_done = [0]

            def faulty_step(batch):
                start = _time.process_time()
                if kind == "copy-input":  # an allocation-bound step: a fresh copy of the features
                    scratch = data.x.clone()
                loss = step(batch)
                steps_done[0] += 1
                if kind == "crash" and steps_done[0] >= amount:
                    raise RuntimeError(f"injected crash in step {{steps_done[0]}}")
                if kind == "nan":
                    if steps_done[0] >= amount:  # the update of step `amount` went wrong
                        import torch as _torch
                        with _torch.no_grad():
                            for param in run.model.parameters():
                                param.fill_(float("nan"))
                        loss = loss * float("nan")
                elif kind == "extra-op":
                    loss.add(1.0)  # one more ATen call and a 4-byte allocation
                elif kind == "copy-input":
                    del scratch  # freed after the step, so the step's peak holds it
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
    """The patch text: ``extra-op`` (one more tensor op per step),
    ``slowdown`` (extra CPU work equal to :obj:`amount` times the step's own,
    self-calibrating whatever the machine's load), ``nan`` (NaN parameters
    and loss from step :obj:`amount` on, counted from 1), ``crash`` (the
    variant's build raises, or from step :obj:`amount` on its steps) or ``unavailable`` (it raises a declared
    "cannot here") or ``copy-input`` (a copy of the features each step),
    for :obj:`variant` only or every variant
    (``None``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown fault {kind!r}; use one of {', '.join(KINDS)}")
    if kind == "slowdown" and not amount > 0:
        raise ValueError("a slowdown needs amount > 0 (0.05 is +5%)")
    if kind == "nan" and not (amount >= 1 and float(amount).is_integer()):
        raise ValueError("a nan fault needs amount = the first broken step (1, 2, ...)")
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
