"""gnnperf's asv benchmark suite (see docs/asv.md)."""
