"""gnnperf's asv benchmark suite (see docs/asv.md).

The helper modules, by concern: :mod:`.suite` (the instrument and the n/a
rules, taken from this checkout; the device; asv's processes),
:mod:`.compat` (shims for older benchmarked commits, and when one may go),
:mod:`.profiles` (what is measured: sizes, variants, models), :mod:`.caches`
(datasets and prepared runs, made once) and :mod:`.base` (the base
classes). The other modules hold the benchmarks."""
from .suite import prepare_process

prepare_process()  # the one thing importing the suite does to its process
