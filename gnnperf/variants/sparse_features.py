"""Sparse input features: the feature matrix as CSR when it is mostly zeros,
dropout on its stored values only and the first layer as a sparse-dense
product (Cora: 49k stored values instead of 3.9M entries)."""
from __future__ import annotations

from gnnperf.models import BLOCKS, SparseFeatures, store_transposed
from gnnperf.variants.base import Technique, TrainingRun


class SparseFeaturesTechnique(Technique):
    r"""Keeps the node features as :class:`~gnnperf.models.SparseFeatures`
    (CSR, its transpose structure built once) when their density pays off
    (:meth:`~gnnperf.models.SparseFeatures.pays_off`; the density, a
    sample's estimate away from the cut-off (:meth:`~gnnperf.models.SparseFeatures.density`),
    recorded as ``feature_density``, and whether it applied as ``sparse_features``;
    denser features stay dense); the first layer
    drops out stored values only (the same distribution as dense dropout:
    zeros stay zero either way) and multiplies sparse by dense. With dropout
    off its outputs equal the dense path's (a test). Full batch and, for
    mini-batch techniques, each batch's gathered rows (converted per batch).
    """
    name = "sparse_features"
    order = 14  # after the batch techniques and trimming: it rewrites their batches
    needs_model = (BLOCKS,)  # the first block's projection multiplies them

    def apply(self, run: TrainingRun) -> None:
        x = run.data.x
        density = SparseFeatures.density(x)
        run.stats["feature_density"] = density
        run.stats["sparse_features"] = sparse = SparseFeatures.pays_off(density)
        if not sparse:
            return  # dense features stay dense: the variant is its reference here
        # Measured with MKL's CPU product. CUDA keeps its layout, and so does
        # DDP, whose gradient buckets are laid out contiguously.
        if run.device.type == "cpu" and run.shard is None:
            store_transposed(run.model.blocks[0].conv.lin.weight)
        # The whole graph's features, converted once in the build, where a
        # batch is the whole graph; trimmed and mini-batch runs read rows only.
        variant = run.variant
        whole = variant is None or not (variant.minibatch or variant.uses("trimmed"))
        full = SparseFeatures.from_dense(x) if whole else None
        dense_x = run.data.x
        base_batches = run.batches

        def batches():
            for batch in base_batches():
                # The full graph's features are converted once; a mini-batch's rows per batch.
                if batch.x is dense_x and full is not None:
                    batch.x = full
                elif not isinstance(batch.x, SparseFeatures):
                    batch.x = SparseFeatures.from_dense(batch.x)
                yield batch

        run.batches = batches
