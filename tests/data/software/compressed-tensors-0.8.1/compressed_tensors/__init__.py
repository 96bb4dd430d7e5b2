# Recorded from the compressed-tensors 0.8.1 wheel on PyPI (2026-11-30): empty here, the probe never imports it.
