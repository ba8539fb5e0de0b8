"""gnnperf's asv benchmark suite (see docs/asv.md): ``benchmarks/`` of a
checkout, ``gnnperf.asv_suite`` of the wheel. asv names the benchmarks by
module and class below this package (``training.TrainStep.time_train_step``),
whatever the package is called: an adopting repository's shim (its
``benchmarks`` folder, gnnperf/asv_init.py) runs this file as its own and
takes its modules from here, so its names are gnnperf's.

The helper modules, by concern: :mod:`.suite` (the instrument and the n/a
rules, taken from the gnnperf that carries the suite; the device; asv's
processes), :mod:`.compat` (shims for older benchmarked commits, and when
one may go), :mod:`.profiles` (what is measured: sizes, variants, models),
:mod:`.caches` (datasets and prepared runs, made once) and :mod:`.base` (the
base classes). The other modules hold the benchmarks."""
from .suite import prepare_process

prepare_process()  # the one thing importing the suite does to its process
