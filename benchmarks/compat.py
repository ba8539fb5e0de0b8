"""Shims for older benchmarked commits: where a commit's gnnperf lacks a
name the suite uses, or spells it otherwise, a shim here looks it up or
stands in, so that the suite's figures reach back through history.

The rule for when a shim may go: when no commit the suite is still run on
(asv.conf.json's ``branches`` history as far back as the nightly and the
gate's ``--base`` reach, docs/asv.md) lacks what it stands in for. Each shim
names the commits it serves ("commits before ..."); delete it with the
last of them, and the suite's tests (tests/test_asv_suite.py) say whether
anything still needs it.
"""
from __future__ import annotations

import torch

from .suite import ERRORS, NotHere

#: The registry as of the first commit, for commits whose gnnperf cannot be imported.
FALLBACK_VARIANTS = ["baseline", "sampled", "amp", "compiled", "checkpointed"]


def gnnperf_name(what: str, *older: str):
    """``gnnperf.<module>.<name>``, else the first of :obj:`older` (where a
    commit before the measurement wing had it: ``"measure.warm_device"``
    for ``"measure.runner.warm_device"``), or :class:`NotImplementedError`
    on a commit that has none of them."""
    errors = []
    for path in (what, *older):
        module, _, name = path.rpartition(".")
        try:
            mod = __import__(f"gnnperf.{module}", fromlist=[name])
            return getattr(mod, name)
        except (ImportError, AttributeError) as exc:
            errors.append(exc)
    raise NotHere(f"this commit's gnnperf lacks {what}: {errors[0]}") from None


def variant(name: str):
    """The registry's variant, or :class:`NotImplementedError` where this
    commit does not have it; any other error of the registry fails."""
    get_variant = gnnperf_name("variants.get_variant")
    try:
        return get_variant(name)
    except Exception as exc:
        if ERRORS.is_unknown_variant(exc):  # a variant this commit does not have (yet)
            raise NotHere(f"variant {name!r}: {exc}") from None
        raise



def registry_standard_variants() -> list[str]:
    """The registry's standard variants whose steps differ (``step_variants``:
    a learning-rate schedule's step is its variant's); commits before it
    their standard variants, commits before the live list an import-time
    snapshot, and commits without a registry the first one's."""
    try:
        from gnnperf.variants import step_variants
        return list(step_variants())
    except ImportError:
        pass
    try:
        from gnnperf.variants import standard_variants
    except ImportError:
        try:
            from gnnperf.variants import STANDARD_VARIANTS
        except ImportError:
            return list(FALLBACK_VARIANTS)
        return list(STANDARD_VARIANTS)
    return list(standard_variants())


def registry_models() -> tuple[str, ...]:
    """The registry's built-in models (the suite's instrument reads them:
    ``gnnperf/measure/case.py``'s ``built_in_models``); GCN alone on a
    commit before them."""
    from .suite import CASES
    return CASES.built_in_models()


def registry_variant(name: str):
    try:
        from gnnperf.variants import get_variant
        return get_variant(name)
    except Exception:  # unknown in this commit, or no registry at all
        return None


def uses(name: str, technique: str) -> bool:
    """Whether variant :obj:`name` uses :obj:`technique`, asked of this
    commit's registry (False where it does not know the variant: its
    benchmarks are n/a there)."""
    found = registry_variant(name)
    if found is None:
        return False
    if hasattr(found, "uses"):
        return found.uses(technique)
    # Commits before Variant.uses: the parsed variant's techniques.
    return any(t.name == technique for t in found.techniques)


def is_minibatch(name: str) -> bool:
    """Whether variant :obj:`name` trains on sampled subgraphs, asked of
    this commit's registry."""
    found = registry_variant(name)
    if found is None:
        return False
    if hasattr(found, "minibatch"):
        return found.minibatch
    # Commits before Variant.minibatch: a technique that makes batches
    # (sampled alone made them before the attribute existed).
    return any(getattr(t, "makes_batches", t.name == "sampled") for t in found.techniques)


def warm_device(dev: torch.device) -> None:
    """The device's one-off first use (on CUDA the context and the cuBLAS and
    cuSPARSE handles, hundreds of MiB of host RSS) before anything is
    measured, so a ``peakmem_`` floor and the benchmarks above it hold the
    same; on a commit without :func:`gnnperf.measure.runner.warm_device`, a CUDA
    context at least."""
    try:
        gnnperf_name("measure.runner.warm_device", "measure.warm_device")(dev)
    except NotImplementedError:
        if dev.type == "cuda":
            torch.ones(1, device=dev).sum().item()



def train_config(**overrides):
    return gnnperf_name("variants.TrainConfig")(**overrides)
