"""`sgl_kernel.speculative`, which SGLang's n-gram drafting imports on the CPU (`kernels/ops/speculative/
reconstruct_tree.py`): present by name only, like the package's other speculative kernels."""

from sgl_kernel import _not_provided

reconstruct_indices_from_tree_mask = _not_provided("speculative.reconstruct_indices_from_tree_mask")
