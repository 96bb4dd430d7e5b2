"""A pure-torch stand-in for the two CPU ops of sgl-kernel that SGLang's CPU engine needs to serve.

Why it exists: SGLang 0.5.23 with `SGLANG_USE_CPU_ENGINE=1` imports two functions from `sgl_kernel`
(`srt/mem_cache/allocation.py` and `kernels/ops/kvcache/cache_move.py`), and the CPU build of sgl-kernel
is not on PyPI: it is only built from source, which takes longer than this project's CI allows. So the
test and demo environment `.venv-sglang` (made by `make sglang`) puts this package on its path instead.
Nothing else of sgl-kernel is provided, on purpose:
- `torch.ops.sgl_kernel.convert_weight_packed` is absent, so SGLang keeps the plain weight path instead of
  the AMX-packed one (`srt/utils/common.py` asks for exactly that op);
- every other name raises AttributeError on import, and SGLang then skips the models that need fused CPU
  ops ("Ignore import error when loading sglang.srt.models.X") and serves the rest.

With it, the tests exercise SGLang's real scheduler, radix cache, HTTP server, streaming, logs and health
rule on the CPU; they do not exercise sgl-kernel's CPU kernels. Use the real sgl-kernel CPU build anywhere
that speed matters. The semantics below are those of SGLang's own Triton kernels of the same purpose.
"""

from __future__ import annotations

import ctypes

import torch


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Write each request's new token locations into its row of the request→token map.

    Request i owns `req_to_token[req_pool_indices[i], start_offset[i]:end_offset[i]]`; its locations are
    the next `end - start` entries of `out_cache_loc`, which holds the batch's requests back to back.
    """
    del pool_len  # the row length is req_to_token's own; the Triton kernel needs it as a pointer stride
    taken = 0
    for row, start, end in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True):
        length = end - start
        req_to_token[row, start:end] = out_cache_loc[taken : taken + length].to(req_to_token.dtype)
        taken += length


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor,
    strides: torch.Tensor,
    tgt_loc: torch.Tensor,
    src_loc: torch.Tensor,
) -> None:
    """Copy the KV rows at `src_loc` onto the rows at `tgt_loc` in every layer buffer.

    Each buffer is given by its base address (`data_ptrs[i]`) and its row size in bytes (`strides[i]`);
    every source row is read before any target row is written, as the Triton kernel loads before it stores.
    """
    if tgt_loc.numel() == 0:
        return
    targets = tgt_loc.to(torch.int64)
    sources = src_loc.to(torch.int64)
    rows = int(torch.maximum(targets.max(), sources.max()).item()) + 1
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        region = (ctypes.c_uint8 * (rows * stride)).from_address(base)
        buffer = torch.frombuffer(region, dtype=torch.uint8).view(rows, stride)
        buffer[targets] = buffer[sources]  # the right side is gathered into a new tensor first


# SGLang's CPU branch imports its speculative-decoding kernels at start-up (`kernels/ops/speculative/`), so
# they must exist by name; speculative decoding does not run on the CPU without AMX anyway (the torch_native
# attention backend has no verify path), so each says so if it is ever called.
SPECULATIVE_KERNELS = (
    "build_tree_kernel_efficient_cpu",
    "verify_tree_greedy_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "rotate_input_ids_cpu",
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
)


def _not_provided(name: str):  # type: ignore[no-untyped-def]
    def kernel(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            f"sgl_kernel.{name}: speculative decoding on the CPU needs the real sgl-kernel CPU build; "
            "this stand-in (tools/sglang_cpu/kernel) serves plain decoding only"
        )

    kernel.__name__ = name
    return kernel


for _name in SPECULATIVE_KERNELS:
    globals()[_name] = _not_provided(_name)
