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
scratch change applied to both arms) and ``busy-wait`` (a fixed CPU time
plus a fraction of the step's own, either of them 0: a scratch history's
commits, each carrying its own size of one wrapper).

Used by the gate's sensitivity study, ``gnnperf bisect``'s tests, the asv
gate demo, ``tools/scratch_history.py`` (each commit: :func:`remove`, then
:func:`inject`) and the gate's tests.
"""
from __future__ import annotations

from pathlib import Path

PATCHED_FILE = "gnnperf/variants/__init__.py"

KINDS = ("extra-op", "slowdown", "nan", "crash", "unavailable", "copy-input", "busy-wait")

#: The first line of every patch: what :func:`remove` cuts the registry at.
MARKER = "\n\n# ---- injected by gnnperf.gate.faults ("

_TEMPLATE = '''

# ---- injected by gnnperf.gate.faults ({kind}; temporary copy only) ----{note}
def _injected_fault_build(build, target={target!r}, kind={kind!r}, amount={amount!r},
                          wait_s={wait_s!r}):
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
                elif kind == "busy-wait":
                    # CPU time, as a slowdown's: more work, which a busy machine
                    # stretches as it stretches the step (a wall-clock wait
                    # would shrink against the step under load).
                    took = _time.process_time() - start
                    deadline = _time.process_time() + wait_s + took * amount
                    while _time.process_time() < deadline:
                        pass
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


def fault_patch(kind: str, variant: str | None = None, amount: float = 0.0,
                wait_us: float = 0.0, note: str = "") -> str:
    """The patch text.

    Args:
        kind (str): ``extra-op`` (one more tensor op per step), ``slowdown``
            (extra CPU work equal to :obj:`amount` times the step's own,
            self-calibrating whatever the machine's load), ``nan`` (NaN
            parameters and loss from step :obj:`amount` on, counted from 1),
            ``crash`` (the variant's build raises, or from step :obj:`amount`
            on its steps), ``unavailable`` (it raises a declared "cannot
            here"), ``copy-input`` (a copy of the features each step) or
            ``busy-wait`` (:obj:`wait_us` microseconds of CPU work plus
            :obj:`amount` times the step's own, each step; both may be 0).
        variant (str, optional): The variant it hits (``None``: every variant).
        amount (float): The kind's size (see :obj:`kind`).
        wait_us (float): ``busy-wait``'s fixed part.
        note (str): A comment the patch carries (a scratch commit's label, so
            that two commits with the same fault still differ).

    Raises:
        ValueError: An unknown kind, or a size the kind cannot take.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown fault {kind!r}; use one of {', '.join(KINDS)}")
    if kind == "slowdown" and not amount > 0:
        raise ValueError("a slowdown needs amount > 0 (0.05 is +5%)")
    if kind == "nan" and not (amount >= 1 and float(amount).is_integer()):
        raise ValueError("a nan fault needs amount = the first broken step (1, 2, ...)")
    if kind == "busy-wait" and not (amount >= 0 and wait_us >= 0):
        raise ValueError("a busy-wait needs amount >= 0 and wait_us >= 0")
    if wait_us and kind != "busy-wait":
        raise ValueError(f"wait_us is busy-wait's; a {kind} fault takes none")
    return _TEMPLATE.format(kind=kind, target=variant, amount=float(amount),
                            wait_s=float(wait_us) * 1e-6,
                            note="".join(f"\n# {line}" for line in note.splitlines()))


def inject(tree: Path, kind: str, variant: str | None = None, amount: float = 0.0,
           wait_us: float = 0.0, note: str = "") -> str:
    """Appends :func:`fault_patch` to :obj:`tree`'s variant registry (after
    any fault it carries already: they stack); returns the patch."""
    if variant is not None:  # the registry's spelling ("amp+compiled" for "compiled+amp")
        from gnnperf.variants import get_variant
        variant = get_variant(variant).name
    patch = fault_patch(kind, variant, amount, wait_us, note)
    with open(Path(tree) / PATCHED_FILE, "a") as registry:
        registry.write(patch)
    return patch


def remove(tree: Path) -> bool:
    """Cuts every injected fault off :obj:`tree`'s variant registry (the
    patches are its tail, from the first :data:`MARKER` on); returns whether
    there was one."""
    registry = Path(tree) / PATCHED_FILE
    text = registry.read_text()
    cut = text.find(MARKER)
    if cut < 0:
        return False
    registry.write_text(text[:cut])
    return True


__all__ = ["KINDS", "MARKER", "PATCHED_FILE", "fault_patch", "inject", "remove"]
