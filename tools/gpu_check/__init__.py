"""One prepared check of every CUDA path of the suite on a GPU machine, in
minutes: ``tools/gpu_check.sh [--device cuda] [--plan call1|call2]
[--budget-s S] [--only|--skip STEPS] [--out DIR]``.

Steps (``--only``/``--skip`` take their keys, or their names), each a
process of its own, so a CUDA error in one cannot poison the next:

- ``stack``: the stack check: torch, CUDA, PyG and gnnperf's own
  dependencies, the GPU, NCCL, and everything a later step needs (asv,
  asv_runner, pymetis, nvidia-ml-py, the compilers, git), naming what is
  missing and which later steps that skips or makes n/a;
- ``doctor``: ``gnnperf doctor`` (its asv check is the ``asv`` step);
- ``variants-cora``, ``variants-large``: every variant of the comparison
  (``gnnperf run``) on Cora and on a 10^6-edge graph (CUDA);
- ``amp-bf16``, ``amp-fp16``: both AMP branches, forced;
- ``ddp``: ``ddp`` and ``sampled+ddp`` in launched ranks: two GPUs, or one
  GPU as a group of one (NCCL: forked ranks, ``set_device``, NCCL's set-up,
  the event-timed all-reduce); one rank on gloo on CPU;
- ``models``: every variant of SAGE, GAT and GIN (CUDA only);
- ``roofs``: ``gnnperf roofs`` and its sanity line against the GPU's
  published fp32 and memory figures;
- ``sampler``: ``gnnperf sampler`` on the large graph;
- ``asv``: ``asv run --quick`` of the ``pr`` profile's CUDA benchmarks (CUDA
  only; in a throwaway commit of a temporary copy where there is no .git).

``--plan call1`` and ``--plan call2`` split the check into two commands
for a GPU runner that limits how long one command may run
(docs/gpu-runner.md). ``--budget-s`` starts no step that cannot finish
inside it (each step's expected seconds on this device) and caps each
step's limit at what is left; what it left is named. Every step's JSON and
log and the summary (``gpu-check.json``, ``gpu-check.md``) are written as
each step ends; in ``$OUT`` (the default ``--out`` where it is set: the
folder a runner collects), the steps' files go into one archive beside the
summary, rewritten after each step, so a runner that collects a few files
gets them all. Exit 0 when every step ran and passed (on CPU the CUDA-only
steps skip), 1 when one failed, was left, or on a GPU was skipped (a
package missing), 2 on bad input. ``--device cpu`` runs the CPU-runnable
parts; tests/test_gpu_check.py runs them, so the script cannot rot.

The package, by concern: :mod:`.core` (a plan, a step, a result),
:mod:`.plan` (the steps and the two calls), :mod:`.environment` (the stack
check), :mod:`.runs` (the ``gnnperf doctor`` and ``gnnperf run`` steps),
:mod:`.roofs` (the roofs and sampler steps), :mod:`.asv_step`,
:mod:`.process` (running one step), :mod:`.report` (the summary and the
archive) and :mod:`.cli` (the command line). ``tools/gpu_check.sh`` runs it
by path (``python tools/gpu_check``); it imports as ``gpu_check`` with
``tools/`` on ``sys.path``.
"""
