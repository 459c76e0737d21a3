"""The software stack's mechanisms where a transformer plan reads them (a mixin of
footprint._Ctx, which sets `self.stack` from the scenario's `stack` key). Each hook returns
None / the unchanged value when the stack lacks the mechanism, so the default `pytorch` stack
estimates exactly as before. The formulas and their sources: workloads/stack_mechanisms.py."""
from __future__ import annotations

from ... import precision as prec_mod
from ...catalog.stacks import default_optimizer
from .. import stack_mechanisms as mech
from . import formats
from .activations import mlp_coeff
from .family import ALL_LINEAR


class StackHooks:
    """Stack hooks of footprint._Ctx (uses sc, stack, notes, opts, p, blocks_g, ...)."""

    def stack_weight_bytes(self, fmt: str) -> int | None:
        """4-bit bitsandbytes weights as transformers loads them by default (no double
        quantisation), T5's fp32 `wo` projections; None: the format's usual bytes."""
        base = None
        if fmt in ("nf4", "int8"):          # a note only: when it applies (issue 22)
            mech.use(self.notes, self.stack, "post-load-cached-blocks")
        if fmt == "nf4" and mech.use(self.notes, self.stack, "bnb-4bit-no-double-quant"):
            base = mech.nf4_weights(self.blocks_g, self.norms_g + self.embed_g)
        n_wo = self._t5_wo_params(fmt)
        if n_wo:
            per = mech.NF4_NO_DOUBLE_QUANT if base is not None else \
                prec_mod.weight_bytes_per_param(fmt)
            base = formats.weight_bytes(self, fmt) if base is None else base
            mech.use(self.notes, self.stack, "t5-fp32-wo")
            return base + mech.t5_fp32_extra(n_wo, per)
        return base

    def _t5_wo_params(self, fmt: str) -> int:
        """The `wo` weights this GPU holds where transformers keeps them fp32 (T5 family in
        fp16, int8 or nf4; the load dtype of 8-bit / 4-bit defaults to float16): one d_ff x
        d_model projection per encoder and decoder layer, split over tensor ranks."""
        a = self.arch
        if fmt not in ("fp16", "int8", "nf4") or a.model_type not in mech.T5_FP32_TYPES or \
                not self.stack.has("t5-fp32-wo"):
            return 0
        return int(a.total_layers * self.stage_frac * a.ffn * a.hidden / self.L.tensor)

    def stack_bnb_block(self, optim: str) -> int:
        """Values per fp32 absmax of bitsandbytes' 8-bit optimizer states: 256 where the
        stack's bitsandbytes is 0.44.0 or later (PR #1365), else the 2048 of before."""
        if optim in ("adamw-8bit", "paged-adamw-8bit") and \
                mech.use(self.notes, self.stack, "bnb-optim-block-256"):
            return 256
        return 2048

    def stack_optimizer(self, optim: str) -> str:
        """The optimizer the plan trains with; notes the stack's default when the scenario
        named none (Unsloth's adamw_8bit: the scenario stage filled it in)."""
        given = getattr(self.sc, "given", None)
        if given is not None and "optimizer" not in given and \
                optim == default_optimizer(self.sc.stack):
            mech.use(self.notes, self.stack, "adamw-8bit-default")
        return optim

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
        the base is bitsandbytes 4-bit, MatMul4Bit saves its input and the compute dtype is
        16-bit (Linear4bit's x.to(compute_dtype) is then x itself, shared by q / k / v), or
        when it is LLM.int8 (MatMul8bitLt saves A, the input itself)."""
        if fmt == "int8" and mech.use(self.notes, self.stack, "bnb-int8-keeps-input"):
            self._int8_outlier_note()
            return {g: True for g in keep}
        if self.sc.task == "qlora" and fmt == "nf4" and \
                not self.stack.has("bnb-4bit-fp32-compute") and \
                mech.use(self.notes, self.stack, "bnb-4bit-keeps-input"):
            return {g: True for g in keep}
        return keep

    def _int8_outlier_note(self) -> None:
        """Say what LLM.int8's outlier columns may add: each int8 linear's call also keeps
        subA (its input's columns holding a value >= the 6.0 threshold, in the input's dtype)
        for backward; how many columns depends on the data, so the bound is given, not
        counted: every column of every int8 linear's input (mech.int8_outlier_bound)."""
        a = self.arch
        if a.is_moe:
            return
        widths = [a.hidden] * 3 + [a.heads * a.head_dim] + \
            [a.hidden] * (2 if a.gated_mlp else 1) + [a.ffn]
        self.notes.append(
            "LLM.int8 outlier columns (bitsandbytes MatMul8bitLt, threshold 6.0): each int8 "
            "linear also keeps subA, the columns of its input with a value >= 6.0, for "
            "backward; their number depends on the data (bitsandbytes' own fake kernel gives it "
            "a dynamic size), so it is not counted: at most every column, "
            f"{mech.int8_outlier_bound(self.p, widths):,} B per token per block "
            "(docs/stacks.md)")

    def stack_saved_coeff(self, keep: dict | None = None) -> float:
        """Bytes per token per hidden unit one block saves beyond the layer model (the stack
        mechanisms that add or drop saved tensors)."""
        return self._bnb_fp32_inputs() + self._litgpt_qkv() + self._mlp_saved_delta(keep)

    def stack_mlp_tile(self, tokens: int) -> int | None:
        """Tokens per tile of Unsloth's tiled MLP (option tiled-mlp; the default "arctic"
        split, unsloth_zoo/tiled_mlp.py tiled_forward_arctic_size: h tokens, at most all of
        them); None where the MLP is not tiled."""
        if "tiled-mlp" not in self.opts or not mech.use(self.notes, self.stack, "tiled-mlp"):
            return None
        return min(self.arch.hidden, int(tokens))

    def _mlp_saved_delta(self, keep: dict | None) -> float:
        """What the stack's MLP saves less what the layer model counts for it: with the tiled
        MLP the MLP's input x alone (TiledMLP.forward: save_for_backward(x)); with Unsloth's
        LoRA_MLP its X, e and g (stack_mlp_coeff)."""
        k = self.kernels(True)
        plain = mlp_coeff(self.arch, k, keep)
        if self.stack_mlp_tile(1) is not None:
            return (self.p - plain) / self.L.tensor
        return (self.stack_mlp_coeff(k, keep) - plain) / self.L.tensor

    def stack_mlp_coeff(self, k, keep: dict | None) -> float:
        """Bytes per token per hidden unit the MLP module saves (per tile under the tiled MLP,
        whose backward recomputes it): Unsloth's LoRA_MLP keeps X, e and g and recomputes the
        activation and product in backward; otherwise the layer model's mlp_coeff."""
        if not self._unsloth_lora_mlp():
            return mlp_coeff(self.arch, k, keep)
        x_bytes = 2 if k.mixed else (1.0 if k.float8 else k.p)   # as mlp_coeff's input term
        return mech.lora_mlp_coeff(x_bytes, k.p, self.arch.ffn / self.arch.hidden)

    def stack_mlp_grads(self) -> int:
        """f-wide gradients one block's MLP backward holds: 2 (the product's two factors);
        1 under Unsloth's LoRA_MLP (its backward writes h, df and de into DW, e and g in
        place, and dX into X)."""
        return 1 if self._unsloth_lora_mlp() else 2

    def _unsloth_lora_mlp(self) -> bool:
        """Unsloth patches a decoder's gated MLP with LoRA_MLP when gate_proj, up_proj and
        down_proj all carry adapters and lora_dropout is 0 (unsloth/models/llama.py
        FastLlamaModel.patch_peft_model; PEFT 'bias' none, the only kind modelled)."""
        sc, a = self.sc, self.arch
        if sc.task not in ("lora", "qlora") or not a.gated_mlp or a.is_moe or \
                a.kind != "decoder" or not self.stack.has("unsloth-lora-kernels"):
            return False
        lora = sc.lora
        if lora is not None and float(lora.dropout or 0) != 0:
            return False
        t = {str(x).lower() for x in (lora.targets if lora is not None else ())}
        if not (t & set(ALL_LINEAR) or {"gate_proj", "up_proj", "down_proj"} <= t):
            return False
        return mech.use(self.notes, self.stack, "unsloth-lora-kernels")

    def _litgpt_qkv(self) -> float:
        """litgpt's fused qkv: the q and k parts kept by the saved v view (as many key / value
        heads as query heads) and, for a LoRA on part of q / k / v, the zero-pad source."""
        a = self.arch
        if not self.stack.has("litgpt-qkv-views"):
            return 0.0
        q, kv = a.heads * a.head_dim / a.hidden, a.kv_heads * a.head_dim / a.hidden
        c = self.p * (q + kv) if a.kv_heads == a.heads else 0.0
        if self.sc.task in ("lora", "qlora") and self.sc.lora is not None:
            t = {x.lower() for x in self.sc.lora.targets}
            fused = bool(t & {"qkv", "c_attn", "query_key_value", "qkv_proj", "all-linear",
                              "all_linear", "all"})
            on = [fused or bool(t & names) for names in
                  ({"q_proj", "q", "query", "wq"}, {"k_proj", "k", "key", "wk"},
                   {"v_proj", "v", "value", "wv"})]
            if any(on) and not all(on):
                c += self.p * sum(w for w, o in zip((q, kv, kv), on) if o)
        if c and mech.use(self.notes, self.stack, "litgpt-qkv-views"):
            return c / self.L.tensor
        return 0.0

    def _bnb_fp32_inputs(self) -> float:
        """With an fp32 compute dtype and MatMul4Bit saving its input, every 4-bit linear
        saves its own fp32 cast of its input (Linear4bit.forward: x = x.to(compute_dtype)):
        q, k, v, gate, up (column-parallel, whole under TP) and o, down (split over t)."""
        if self.sc.task != "qlora" or prec_mod.is_quantized(self.prec) and self.prec != "nf4":
            return 0.0
        if not (self.stack.has("bnb-4bit-fp32-compute") and
                mech.use(self.notes, self.stack, "bnb-4bit-keeps-input")):
            return 0.0
        a = self.arch
        f = a.moe_ffn if a.is_moe else a.ffn
        col = 3 + (2 if a.gated_mlp else 1)
        row = (a.heads * a.head_dim + f) / a.hidden / self.L.tensor
        return 4.0 * (col + row)

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

    def stack_dequant_bytes(self, fmt: str | None) -> int:
        """A QLoRA block's backward under transformers' default fp32 bnb compute dtype: the
        widest 4-bit linear's fp32 dequantised weight with its fp32 input and output; an
        LLM.int8 base's backward: the widest linear's 16-bit dequantised copy and its fp32
        row scales (MatMul8bitLt.backward); 0 otherwise."""
        a = self.arch
        f = a.moe_ffn if a.is_moe else a.ffn
        if fmt == "int8" and mech.use(self.notes, self.stack, "bnb-int8-copies"):
            return (self.p * a.hidden * f + 4 * max(a.hidden, f)) // self.L.tensor
        if self.sc.task != "qlora" or fmt != "nf4" or \
                not mech.use(self.notes, self.stack, "bnb-4bit-fp32-compute"):
            return 0
        return mech.fp32_dequant_bytes(a.hidden, f, self.tokens()) // self.L.tensor

    def stack_int8_call_bytes(self, tokens) -> int:
        """An inference pass's LLM.int8 copies at its widest block linear (h -> f: the int8
        input, fp32 row scales, the int32 accumulator), beside what a 16-bit call holds;
        0 unless the weights are int8 on a stack with bitsandbytes' LLM.int8."""
        if self.prec != "int8" or not mech.use(self.notes, self.stack, "bnb-int8-copies"):
            return 0
        a = self.arch
        f = a.moe_ffn if a.is_moe else a.ffn
        return mech.int8_call_bytes(a.hidden, f, tokens) // self.L.tensor

    def stack_selective_drop(self) -> float:
        """Bytes per token per hidden unit selective checkpointing does not keep where the
        stack recomputes the attention kernel (torchtitan's cuDNN attention on compute
        capability >= 10.0 before PR #2095): its output and fp32 log-sum-exp."""
        cc = str(getattr(self.dev, "compute_capability", None) or "0")
        if (self.sc.attention or "sdpa") == "eager" or int(cc.split(".")[0] or 0) < 10:
            return 0.0
        if not mech.use(self.notes, self.stack, "cudnn-attention-recomputed"):
            return 0.0
        a = self.arch
        return (self.p * a.heads * a.head_dim + 4 * a.heads) / a.hidden / self.L.tensor

    def stack_dtensor_tp(self) -> bool:
        """Whether this selective-checkpointing TP plan follows torchtitan's DTensor TP and
        op SAC (the default, and torchtitan): False, with the mechanism's note, where the
        stack's TP is Megatron's (megatron, deepspeed: mechanism megatron-selective-tp), whose
        replay re-gathers no input and whose embedding gradient is the vocabulary shard. Ask
        only where a term would change."""
        return not mech.use(self.notes, self.stack, "megatron-selective-tp")
