"""From a TFLite model to NPU work: support rules, partitioning, liveness, lowering."""
