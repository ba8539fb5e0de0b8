"""gnnperf in another repository's CI: the nightly's results kept in git
(:mod:`gnnperf.ci.nightly`), the rules a workflow that reaches a GPU box
must keep (:mod:`gnnperf.ci.policy`), and ``gnnperf adopt``, which writes
the suite and the workflows into a library's or a model package's
repository (:mod:`gnnperf.ci.adopt`).

Nothing here imports torch: the workflows run these commands from a venv
that holds gnnperf without its dependencies.
"""
