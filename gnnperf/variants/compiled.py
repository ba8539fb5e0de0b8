"""torch.compile of the model, counting graphs, graph breaks and recompiles."""
from __future__ import annotations

import torch

from torch.optim.adam import adam

from gnnperf.errors import Unavailable
from gnnperf.torch_private import (cpp_compiler, dynamo_config, dynamo_counts, inductor_options,
                                   traces_autograd_ops)
from gnnperf.variants.base import Batch, Technique, TrainingRun


def compile_unavailable_because(device: torch.device | str) -> str | None:
    """Why :func:`torch.compile` cannot run on :obj:`device` here, in one
    line naming the fix, or None when it can: on CPU, Inductor builds every
    kernel with a C++ compiler, and without one the first compiled call
    fails. The one definition: ``gnnperf run`` asks it before the dataset
    loads, :class:`Compiled` before it compiles (so the gate's workers, asv
    and the doctor see a declared n/a). CUDA kernels are Triton's, which
    needs no C++ compiler; its own needs are left to its first compile."""
    if torch.device(device).type != "cpu" or cpp_compiler() is not None:
        return None
    # The fix within the table's first 60 characters of a reason.
    return ("no C++ compiler for torch.compile on CPU: install g++ (apt-get install g++) or "
            "set CXX to one (Inductor runs $CXX, else g++ from PATH)")


class CompileCounter:
    """Graphs and graph breaks Dynamo produced since this counter was made
    (Dynamo's own counters, which skip its internal tracing restarts)."""

    def __init__(self) -> None:
        self._graphs_at_start, self._breaks_at_start = dynamo_counts()

    @property
    def graphs(self) -> int:
        return dynamo_counts()[0] - self._graphs_at_start

    @property
    def graph_breaks(self) -> int:
        return dynamo_counts()[1] - self._breaks_at_start


# Inductor settings for CPU runs:
# - fallback_random: Inductor's CPU random numbers cost several times ATen's
#   uniform_ per element, and the input dropout draws one per feature value
#   per step. ATen's generator also gives the eager dropout masks, so the
#   compiled loss curve follows the baseline's.
# - realize_reads_threshold=1: store a pointwise result that several kernels
#   read instead of recomputing it in each. Otherwise the backward recomputes
#   the ReLU and dropout masks inside the edge gather, once per edge rather
#   than once per node.
# - size_asserts/alignment_asserts off: the Python wrapper of a whole-step
#   graph checks every fallback kernel's output (random, mm, the CSR
#   products), dozens of asserts a step, a visible share of a small graph's
#   step. The CSR op's fake sizes are tested (tests/test_models.py).
# CUDA keeps Inductor's defaults (its fused Philox RNG is fast there).
# Private names (Inductor's config), each in torch 2.11 to 2.13: passed
# through torch_private.inductor_options, which leaves out one a torch lacks
# (tests/test_torch_private.py's canary fails on such a torch).
CPU_INDUCTOR_OPTIONS = {"fallback_random": True, "realize_reads_threshold": 1,
                        "size_asserts": False, "alignment_asserts": False}


def adam_state(optimizer: torch.optim.Adam,
               params: list[torch.nn.Parameter]) -> tuple[list, list, list]:
    """The Adam state of :obj:`params` (first moments, second moments, step
    counts), created as :class:`torch.optim.Adam` creates it on its first
    step, so the eager optimiser can go on from a compiled step's state."""
    for param in params:
        state = optimizer.state[param]
        if not state:
            # Fused (and capturable) Adam's layout: a float32 step on the parameter's device.
            state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
    states = [optimizer.state[param] for param in params]
    return ([s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
            [s["step"] for s in states])


def whole_step_blocker(run: TrainingRun) -> str | None:
    """Why :obj:`run`'s step cannot be traced whole (None: it can)."""
    if not traces_autograd_ops():
        return (f"Dynamo in torch {torch.__version__} cannot trace autograd.grad "
                f"(trace_autograd_ops, torch 2.11 on)")
    for technique in run.variant.techniques:
        if technique.step_untraceable_because is not None:
            return f"{technique.name}: {technique.step_untraceable_because}"
    if run.scaler is not None:
        return "the fp16 gradient scaler checks for infinities between backward and update"
    if type(run.optimizer) is not torch.optim.Adam or len(run.optimizer.param_groups) != 1:
        return "the optimiser is not one Adam parameter group"
    group = run.optimizer.param_groups[0]
    if group["amsgrad"] or group["maximize"] or group["differentiable"] \
            or group.get("decoupled_weight_decay", False):
        return "the Adam options are not the plain ones"
    return None


def compile_whole_step(run: TrainingRun, dynamic: bool, options: dict | None):
    r"""One compiled function of the batch that runs :obj:`run`'s whole step:
    loss, gradients (``torch.autograd.grad``, which Dynamo traces into the
    same graph) and the Adam update (``torch.optim.adam.adam``, the
    functional form of :class:`torch.optim.Adam`, on the optimiser's own
    state). Inductor then fuses the backward's and the update's pointwise work
    and the step runs as a few dozen kernels behind one guard check, where
    eagerly it is about a hundred ATen calls, each with its dispatch cost."""
    params = [p for p in run.model.parameters() if p.requires_grad]
    exp_avgs, exp_avg_sqs, steps = adam_state(run.optimizer, params)
    group = run.optimizer.param_groups[0]
    beta1, beta2 = group["betas"]
    capturable = run.device.type == "cuda"  # step counts on the GPU: no host sync per step
    weight_decay = group["weight_decay"]

    def step(batch: Batch) -> torch.Tensor:
        loss = run.loss(batch)
        grads = list(torch.autograd.grad(loss, params))
        with torch.no_grad():
            if weight_decay:
                # Adam's L2 term is grad.add(param, alpha=weight_decay). After
                # a weight's gradient mm, Inductor's addmm pattern (torch 2.13,
                # fx_passes/post_grad.py: addmm) turns that add into
                # addmm(param, ...) and drops alpha: a decay of 1 instead of
                # 5e-4, which wrecks training. A product the pattern keeps.
                grads = [grad + param * weight_decay for grad, param in zip(grads, params)]
            adam(params, grads, exp_avgs, exp_avg_sqs, [], steps, foreach=False,
                 capturable=capturable, amsgrad=False, beta1=beta1, beta2=beta2,
                 lr=group["lr"], weight_decay=0.0, eps=group["eps"], maximize=False)
        return loss.detach()

    compiled = torch.compile(step, dynamic=dynamic, options=options)

    def traced_step(batch: Batch) -> torch.Tensor:
        # Dynamo traces autograd.grad only with this flag (private:
        # gnnperf.torch_private; otherwise a graph break before it). It is
        # read while tracing, which happens inside the call, so it is set
        # around each call, by hand: torch._dynamo.config.patch costs
        # several times as much a call. Canary: tests/test_variants.py::test_compiled_traces_the_whole_step
        config = dynamo_config()
        previous = config.trace_autograd_ops
        config.trace_autograd_ops = True
        try:
            return compiled(batch)
        finally:
            config.trace_autograd_ops = previous
    return traced_step


class Compiled(Technique):
    """:func:`torch.compile` of the training step: the whole step (forward,
    backward and Adam update as one graph) where the other techniques allow it
    (:func:`whole_step_blocker`), otherwise the forward; dynamic shapes when
    the batches vary in size (sampled), so it compiles once instead of
    recompiling per batch and falling back to eager. ``stats["compiled"]``
    says which was compiled."""
    name = "compiled"
    order = 90  # wraps whatever the other techniques set up

    @classmethod
    def unavailable_on(cls, device: torch.device) -> str | None:
        return compile_unavailable_because(device)

    def apply(self, run: TrainingRun) -> None:
        reason = self.unavailable_on(run.device)
        if reason:  # before anything compiles or trains
            raise Unavailable(reason)
        # Dynamo caches compiled frames per code object, not per model: a
        # second run of the same model class in this process would reuse the
        # first one's graphs, and its compile time and graph counts would read
        # as zero. Each compiled run starts from an empty cache.
        torch.compiler.reset()
        run.compile_counter = CompileCounter()
        options = inductor_options(CPU_INDUCTOR_OPTIONS) if run.device.type == "cpu" else None
        blocker = whole_step_blocker(run)
        if blocker is None:
            run.compiled_step = compile_whole_step(run, run.dynamic_shapes, options)
            run.stats["compiled"] = "step"
        else:
            # The forward as the other techniques left it (the model, or its DDP wrapper).
            run.forward = torch.compile(run.forward, dynamic=run.dynamic_shapes, options=options)
            run.stats["compiled"] = f"forward ({blocker})"
