# Recorded from compressed_tensors/config/base.py of the compressed-tensors 0.8.1 wheel on PyPI (2026-11-30):
# only the enum that the software probe reads (Apache-2.0, (c) Neuralmagic, Inc.).
from enum import Enum


class CompressionFormat(Enum):
    dense = "dense"
    sparse_bitmask = "sparse-bitmask"
    int_quantized = "int-quantized"
    float_quantized = "float-quantized"
    naive_quantized = "naive-quantized"
    pack_quantized = "pack-quantized"
    marlin_24 = "marlin-24"
