"""A gate worker: one process measuring one arm (a tree under one Python).

Run by path, never imported: ``python worker.py --mode time|work --tree T
--instrument DIR --cases JSON`` (or ``--probe NAMES`` instead of ``--cases``:
the worker first prints ``{"probe": ...}``, what :func:`probe` finds of the
arm, and reads ``{"cases": [...]}`` or ``{"quit": true}`` from stdin, so the
gate's first workers are also its probes; ``--mode probe`` prints the probe
alone). gnnperf comes from the arm's tree (put first
on ``sys.path``); the instrument (``measure/case.py``, ``measure/workcount.py``
and ``errors.py``) from the head checkout's ``gnnperf`` folder :obj:`DIR`, loaded by path, so both arms are
built, warmed and measured by the same code. Only the standard library and
torch are imported here: the arm's Python may be another environment.

``work`` prints one JSON line: every case's work metrics, or for a case not
measured ``{"status": ..., "reason": ...}``: ``absent`` (the tree's registry
lacks the variant), ``unavailable`` (gnnperf's declared "cannot here": an
optional dependency missing, ...) or ``error`` (anything else: a crash, a
non-finite loss). ``time`` prints ``{"ready": ..., "step_s": [...],
"status": [...]}`` once prepared (``null`` status for a case it can time),
then answers each request line ``{"case": i, "steps": n}`` with ``{"wall": s,
"cpu": s}`` per step (or ``{"error": ...}`` when the block's loss is not
finite), until ``{"quit": true}``. ``profile`` prepares the cases as
``time`` does and prints the same ready line, then answers ``{"case": i,
"steps": n}`` with the CPU self time and calls per op of n steps
(``workcount.profile_self_times``) and ``{"overhead": true}`` with the
arm's per-op overhead (``workcount.empty_op_ns``): what the gate's
explanation of a change reads in each arm's own environment.
"""
from __future__ import annotations

import os
import sys

# Run as a script, this folder heads sys.path; its modules must not shadow
# the standard library's for the arm's imports.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
from pathlib import Path  # noqa: E402


def load_instrument(folder: Path, name: str):
    """``folder/name.py`` as a standalone module (not ``gnnperf.<name>``),
    once per process: ``case.py`` loads its sibling ``errors.py`` under the
    same name, so both see one ``NonFiniteLoss``."""
    if f"_gnnperf_gate_{name}" in sys.modules:
        return sys.modules[f"_gnnperf_gate_{name}"]
    spec = importlib.util.spec_from_file_location(f"_gnnperf_gate_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_errors(folder: Path):
    """The instrument's ``errors.py``: the one rule of what is absent and
    what is a declared "cannot here", applied to the arm tree's exceptions."""
    return load_instrument(folder, "errors")


def status(kind: str, exc: BaseException) -> dict:
    """A case not measured: its status and the one line that says why."""
    text = str(exc).strip().splitlines()
    return {"status": kind, "reason": f"{type(exc).__name__}: {text[0] if text else ''}"
            if kind == "error" else (text[0] if text else type(exc).__name__)}


def prepare_cases(args: argparse.Namespace, measure=None):
    """Every case of :obj:`args` prepared, or its :func:`status` where it
    cannot be; with :obj:`measure`, each is measured as soon as it is
    prepared and only the measurement kept: building a case resets Dynamo,
    which would make an earlier compiled case recompile inside its
    measurement."""
    tree = Path(args.tree).resolve()
    sys.path.insert(0, str(tree))
    import gnnperf
    from gnnperf.data import load_dataset
    from gnnperf.variants import get_variant

    if not Path(gnnperf.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"gnnperf imported from {gnnperf.__file__}, not from {tree}")
    instrument = Path(args.instrument)
    case_module = load_instrument(instrument / "measure", "case")
    errors = load_errors(instrument)
    workcount = (load_instrument(instrument / "measure", "workcount")
                 if args.mode in ("work", "profile") else None)
    datasets: dict = {}
    prepared = []
    for text in json.loads(args.cases):
        case = case_module.Case.from_json(json.dumps(text))
        try:
            get_variant(case.variant)
        except Exception as exc:  # noqa: BLE001
            # Unknown to this tree's registry: absent (yet, or any more); a
            # registry that crashes is an error, never "absent".
            prepared.append(status("absent" if errors.is_unknown_variant(exc) else "error", exc))
            continue
        try:
            missing_model = _missing_model(dict(case.config).get("model"))
            if missing_model:  # a tree before the model axis, or without this model: absent
                prepared.append({"status": "absent", "reason": missing_model})
                continue
            if case.dataset not in datasets:
                datasets[case.dataset] = load_dataset(case.dataset)
            ready = case_module.prepare(case, datasets[case.dataset])
            prepared.append(ready if measure is None else measure(workcount, ready))
        except Exception as exc:  # noqa: BLE001 -- every failure is reported, none hidden
            prepared.append(status("unavailable" if errors.is_unavailable(exc) else "error", exc))
    return prepared


def _missing_model(model: str | None) -> str | None:
    """Why this tree cannot train :obj:`model` (it has no model registry, or
    not that model), or None when it can or the case is GCN's (every tree's)."""
    if model is None:
        return None
    try:
        from gnnperf.models import get_model
    except ImportError:
        return f"this tree has no model registry (model {model})"
    try:
        get_model(model)
    except Exception as exc:  # noqa: BLE001 -- only "no such model" is absent
        if str(exc).startswith("unknown model"):
            return str(exc)
        raise
    return None


def _work_of(workcount, case) -> dict:
    before = case.steps_done
    metrics = workcount.measure_work(case)
    case.check_loss(case.last_loss, case.steps_done - before)  # its counted steps, too
    return dict(metrics.to_dict(), exact=metrics.exact())


def work(args: argparse.Namespace) -> None:
    sys.stdout.write(json.dumps(prepare_cases(args, measure=_work_of)) + "\n")


def layout_fingerprint() -> dict:
    """Where this process's allocations land and how it hashes: a fresh
    small object's address (Python's heap), a fresh anonymous mapping's
    (the mmap base ASLR draws) and a string's hash (the hash seed). Two
    processes forked from one parent report the same; independently started
    ones (or forks of independently exec'd parents) differ."""
    import ctypes
    import mmap

    region = mmap.mmap(-1, mmap.PAGESIZE)
    try:
        anchor = ctypes.c_char.from_buffer(region)
        mapping = ctypes.addressof(anchor)
        del anchor
    finally:
        region.close()
    return {"heap": id(object()), "mmap": mapping, "hash": hash("gnnperf layout")}


def _ready(args: argparse.Namespace) -> list:
    """The cases prepared and given a few more warm steps, and the ready
    line printed (a rough step time and a status per case)."""
    cases = prepare_cases(args)
    step_s, states = [], []
    for i, case in enumerate(cases):  # a few more warm steps, and a rough per-step time
        if isinstance(case, dict):
            step_s.append(None)
            states.append(case)
            continue
        try:
            samples = [case.timed_steps(1).wall for _ in range(3)]
        except Exception as exc:  # noqa: BLE001 -- a non-finite loss or a crash: reported
            cases[i] = status("error", exc)
            step_s.append(None)
            states.append(cases[i])
            continue
        step_s.append(statistics.median(samples))
        states.append(None)
    if args.mode == "profile":
        # The profiler's first start in a process costs seconds (Kineto's
        # set-up): paid here, off every profile that is compared.
        load_instrument(Path(args.instrument) / "measure", "workcount").profile_self_times(
            lambda: None)
    # The set-up's objects frozen: the collector's full passes inside a
    # sample walk only what the steps make.
    load_instrument(Path(args.instrument) / "measure", "case").freeze_collector()
    print(json.dumps({"ready": True, "step_s": step_s, "status": states,
                      "layout": layout_fingerprint()}), flush=True)
    return cases


def serve_time(args: argparse.Namespace) -> None:
    cases = _ready(args)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            break
        case, steps = cases[request["case"]], request["steps"]
        try:  # a crash or a non-finite loss ends this case, not the worker
            per_step = case.timed_steps(steps)  # the loss checked off the clock
        except Exception as exc:  # noqa: BLE001
            reason = status("error", exc)["reason"]
            if not isinstance(exc, ArithmeticError):  # a crash: the step it crashed in
                reason += f" (in step {case.steps_done})"
            print(json.dumps({"error": reason}), flush=True)
            continue
        print(json.dumps({"wall": per_step.wall, "cpu": per_step.cpu}), flush=True)


def serve_profile(args: argparse.Namespace) -> None:
    """Profiles on request: the step the time worker times (the same
    prepared case, its synchronised step), in this arm's environment."""
    cases = _ready(args)
    workcount = load_instrument(Path(args.instrument) / "measure", "workcount")
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            break
        if request.get("overhead"):
            print(json.dumps(workcount.empty_op_ns()), flush=True)
            continue
        case, steps = cases[request["case"]], request["steps"]
        try:
            found = workcount.profile_self_times(case.synced_step, steps)
            case.check_loss(case.last_loss, steps)
        except Exception as exc:  # noqa: BLE001 -- reported; the other cases go on
            print(json.dumps({"error": status("error", exc)["reason"]}), flush=True)
            continue
        print(json.dumps(found), flush=True)


def probe(tree: str, names: list[str]) -> dict:
    """What the arm is: its Python, torch and PyG versions, its registry's
    standard variants whose steps differ (``step_variants``) and, per name
    asked about, the registry's spelling (``None``: unknown there)."""
    sys.path.insert(0, str(Path(tree).resolve()))
    import torch
    import torch_geometric
    import gnnperf
    from gnnperf.variants import get_variant
    try:  # the variants whose steps differ (a schedule's step is its variant's)
        from gnnperf.variants import step_variants as listed
    except ImportError:  # trees before lr_boost
        try:
            from gnnperf.variants import standard_variants as listed
        except ImportError:  # trees before the live registry list
            from gnnperf.variants import STANDARD_VARIANTS
            listed = lambda: STANDARD_VARIANTS  # noqa: E731
    standard = list(listed())
    known = {}
    for name in names:
        try:
            known[name] = get_variant(name).name
        except Exception:  # noqa: BLE001 -- unknown, or a registry that cannot say
            known[name] = None
    return {"python": sys.version.split()[0], "torch": torch.__version__,
            "gnnperf": getattr(gnnperf, "__version__", "unknown"),
            "torch_geometric": torch_geometric.__version__,
            "standard_variants": list(standard), "known": known}


def probe_then_read_cases(args: argparse.Namespace) -> bool:
    """Reports the arm's :func:`probe` (one line), then reads its cases from
    stdin (``{"cases": [...]}``); ``False`` when told to quit instead (a
    name neither arm knows: nothing is measured)."""
    print(json.dumps({"probe": probe(args.tree, json.loads(args.probe))}), flush=True)
    line = sys.stdin.readline()
    request = json.loads(line) if line.strip() else {"quit": True}
    if request.get("quit"):
        return False
    args.cases = json.dumps(request["cases"])
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("time", "work", "probe", "profile"), required=True)
    parser.add_argument("--tree", required=True)
    parser.add_argument("--instrument", required=True)
    parser.add_argument("--cases", default="[]",
                        help="JSON list of cases; with --probe they come on stdin after it")
    parser.add_argument("--probe", default=None,
                        help="JSON list of names: first report the arm (see probe())")
    args = parser.parse_args()
    if args.mode == "probe":
        print(json.dumps(probe(args.tree, json.loads(args.probe or "[]"))))
        return
    if args.probe is not None and not probe_then_read_cases(args):
        return
    {"work": work, "time": serve_time, "profile": serve_profile}[args.mode](args)


if __name__ == "__main__":
    main()
