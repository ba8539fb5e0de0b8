"""The samplers, in vectorised pure PyTorch (no ``pyg-lib`` or
``torch-sparse``, which have no wheels on plain PyPI installs):

- :mod:`~gnnperf.sampling.neighbor`: the neighbor sampler behind ``sampled``,
  a PyG ``BaseSampler`` that PyG's loaders batch around;
- :mod:`~gnnperf.sampling.subgraph`: whole subgraphs, GraphSAINT's random
  walks (``saint``) and Cluster-GCN's METIS parts (``cluster``).

The neighbor sampler's public names stay importable from here, where they
have always been (``gnnperf.sampling.make_neighbor_loader``); resolved on first
use, so importing the subgraph samplers does not import PyG's loaders.
"""
from __future__ import annotations

_NEIGHBOR = ("BufferPool", "VectorizedNeighborSampler", "make_neighbor_loader",
             "native_sampler_available")


def __getattr__(name: str):
    if name in _NEIGHBOR:
        from gnnperf.sampling import neighbor
        return getattr(neighbor, name)
    raise AttributeError(f"module 'gnnperf.sampling' has no attribute {name!r}")


__all__ = list(_NEIGHBOR)
