"""The software stack's mechanisms where a transformer plan reads them (a mixin of
footprint._Ctx, which sets `self.stack` from the scenario's `stack` key). Each hook returns
None / the unchanged value when the stack lacks the mechanism, so the default `pytorch` stack
estimates exactly as before. The formulas and their sources: workloads/stack_mechanisms.py."""
from __future__ import annotations

from .. import stack_mechanisms as mech


class StackHooks:
    """Stack hooks of footprint._Ctx (uses sc, stack, notes, opts, p, blocks_g, ...)."""

    def stack_weight_bytes(self, fmt: str) -> int | None:
        """4-bit bitsandbytes weights as transformers loads them by default (no double
        quantisation); None: the format's usual bytes."""
        if fmt == "nf4" and mech.use(self.notes, self.stack, "bnb-4bit-no-double-quant"):
            return mech.nf4_weights(self.blocks_g, self.norms_g + self.embed_g)
        return None

    def stack_loss_bytes(self, tokens: int, vocab: int) -> int | None:
        """The training loss's bytes at the start of backward where the stack replaces the
        eager cross-entropy; None: the eager loss (or chunked-loss, which the user chose)."""
        if "chunked-loss" in self.opts:
            return None
        if "loss-parallel" in self.opts and self.L.tensor > 1 and \
                mech.use(self.notes, self.stack, "loss-parallel-backward"):
            return mech.loss_parallel_bytes(tokens, vocab)   # vocab: this rank's shard
        if "compile" in self.opts and mech.use(self.notes, self.stack, "compiled-loss"):
            return mech.compiled_loss_bytes(self.p, tokens, vocab)
        if mech.use(self.notes, self.stack, "fused-cross-entropy"):
            return mech.fused_ce_bytes(self.p, tokens, vocab)
        return None

    def stack_keep(self, keep: dict, fmt: str) -> dict:
        """Which linear groups keep their input for backward in a LoRA plan: all of them when
        the base is bitsandbytes 4-bit and MatMul4Bit saves its input."""
        if self.sc.task == "qlora" and fmt == "nf4" and \
                mech.use(self.notes, self.stack, "bnb-4bit-keeps-input"):
            return {g: True for g in keep}
        return keep

    def stack_offloads_blocks(self) -> bool:
        """Full checkpointing whose block inputs go to the host (Unsloth's offloaded
        gradient checkpointing)."""
        return (self.sc.checkpointing or "none") == "full" and \
            mech.use(self.notes, self.stack, "offloaded-checkpointing")

    def stack_fsdp_root(self) -> int:
        """Parameters (per GPU) FSDP keeps gathered outside the blocks: the root unit's
        embeddings and head, or with torchtitan's own units (PR #1094) the head alone."""
        if mech.use(self.notes, self.stack, "fsdp2-own-units"):
            return int(self._head / self.L.tensor) if self.last else 0
        return self.embed_g
