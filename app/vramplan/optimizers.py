"""Optimizer state per parameter, and the temporaries of the optimizer step.

What PyTorch and the usual libraries actually allocate: torch.optim states are
`zeros_like(param)`, so they take the parameter's dtype (bf16 params -> bf16 Adam states; AMP
keeps fp32 params -> fp32 states). States are created lazily in the first `step()`.
"""
from __future__ import annotations

OPTIMIZERS = ("adamw", "adam", "sgd", "sgd-momentum", "adafactor", "adamw-8bit",
              "paged-adamw-8bit", "lion", "none")

# bitsandbytes 8-bit optimizers: two uint8 states with one fp32 absmax per block of 2048
# (bnb.optim.Optimizer8bit, block-wise quantisation, Dettmers et al. 2022); tensors with fewer
# than 4096 elements (min_8bit_size) keep 32-bit states (negligible: norms and biases).
# bitsandbytes 0.44.0 (PR #1365, aa57bd89, 2024-09) cut the block to 256 (optim/optimizer.py
# Optimizer2State.init_state: blocksize = 256): a stack that dates its bitsandbytes passes it.
_BNB_BLOCK = 2048
BNB8_BYTES_PER_PARAM = 2 * (1 + 4 / _BNB_BLOCK)


def state_bytes(optimizer: str, n_params: int, param_bytes: int,
                matrices: list[tuple[int, int, int]] | None = None,
                bnb_block: int = _BNB_BLOCK) -> int:
    """Optimizer-state bytes for `n_params` parameters stored with `param_bytes` each.

    `matrices` ((rows, cols, count) of every 2-D weight) lets Adafactor factor its second
    moment: rows + cols fp32 values per matrix, full size for the rest (vectors).
    `bnb_block`: the values per fp32 absmax of bitsandbytes' 8-bit states."""
    if optimizer in ("adamw", "adam"):
        return 2 * param_bytes * n_params          # exp_avg + exp_avg_sq
    if optimizer in ("sgd-momentum", "lion"):
        return param_bytes * n_params               # momentum_buffer / exp_avg
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return int(2 * (1 + 4 / bnb_block) * n_params)
    if optimizer == "adafactor":
        # transformers.Adafactor (beta1=None default: no first moment); states in fp32 because it
        # upcasts 16-bit grads; factored (row + col) for >= 2-D tensors.
        if not matrices:
            return 4 * n_params
        in_mats = sum(r * c * k for r, c, k in matrices)
        factored = sum((r + c) * k for r, c, k in matrices)
        return 4 * (factored + max(0, n_params - in_mats))
    return 0                                        # sgd, none


def step_temporary_bytes(optimizer: str, n_params: int, param_bytes: int, largest_param: int,
                         impl: str = "foreach") -> int:
    """Transient bytes at the peak of the optimizer step.

    torch Adam/AdamW `foreach` (the CUDA default since torch 2.0): `_foreach_sqrt(exp_avg_sq)`
    makes a full temporary copy of the second moment -> +1 state (fp32 Adam: 4+4+8+4 = 20 B/param).
    `fused` / per-tensor loop / optimizer-in-backward: one parameter's worth at a time.
    Adafactor (per-tensor loop): grad**2 update + row/col temporaries ~ 3 fp32 copies of the
    largest parameter. SGD/Lion foreach: one copy of the update of the largest group ~ 1 param."""
    if optimizer in ("none", "sgd"):
        return 0
    if optimizer in ("adamw", "adam"):
        if impl == "foreach":
            return param_bytes * n_params
        return param_bytes * largest_param
    if optimizer == "adafactor":
        return 3 * 4 * largest_param
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return 0                                    # fused CUDA kernel, in place
    return param_bytes * largest_param              # sgd-momentum, lion
