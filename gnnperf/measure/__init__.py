"""The measurement wing: everything that turns a built training run into
figures, and the one driver that trains the variants while it measures them
(:mod:`~gnnperf.measure.runner`); nothing that parallelises.

- :mod:`~gnnperf.measure.spread`: quartiles and the relative IQR, shared with the gate.
- :mod:`~gnnperf.measure.probes`: memory timeline and the NVML GPU monitor.
- :mod:`~gnnperf.measure.workcount`: exact work (ATen ops, FLOPs, bytes) of steps.
- :mod:`~gnnperf.measure.roofline`: the device's roofs and each step's distance from them.
- :mod:`~gnnperf.measure.case`: a (variant, dataset, model) case as the gate and asv
  prepare it, and the instrument all of them measure with: the clock, the step
  timer, the finite check and the collector's tuning.
- :mod:`~gnnperf.measure.runner`: the one epoch driver (:func:`measure_variant`)
  that ``gnnperf run``, the doctor, DDP ranks and the tests measure with.

Nothing is imported here, so that a low module (case, spread) loads without
the runner and the registry above it.
"""
