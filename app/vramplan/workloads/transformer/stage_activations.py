"""The activations a transformer training stage saves (workloads/transformer/training.py):
one block's coefficients per rank (activations.layer_coeffs split by TP / SP), the stage's
blocks under each checkpointing mode and pipeline schedule, one block's backward temporaries,
and the notes on the kernel facts that changed them. A mixin of training.Training, so of
footprint._Ctx, whose fields it reads (sc, arch, L, b, s, t, p, mixed, notes, ...)."""
from __future__ import annotations

from types import SimpleNamespace

from ... import parallel as par
from ... import precision as prec_mod
from ...catalog import hf_config
from ...vec import vmax
from . import encdec as encdec_mod
from . import lowp_training, mixer_activations, sharding
from .activations import inner_dropout, layer_coeffs, saves_output, selective_coeff


class StageActivations:
    """Saved activations of one training stage (methods of footprint._Ctx through Training)."""

    def _stage_activations(self, keep) -> SimpleNamespace:
        """The activations this stage keeps at the end of its forwards (every micro-batch in
        flight), one micro-batch's share, the widest block (backward starts there) and the
        token counts the head and loss use."""
        a, L = self.arch, self.L
        ga = int(self.sc.gradient_accumulation or 1)
        blk = self._block_coeffs(keep)
        sbh, sbh_mean = blk.sbh, blk.sbh_mean
        nl = par.stage_layers(a.total_layers, L.pipeline)
        # 1F1B: min(pp - i, m) micro-batches; interleaved (virtual_stages v): v chunks of
        # nl / v blocks, (2 (pp - i - 1) + (v - 1) pp + 1) chunk forwards (parallel.py)
        inflight = par.interleaved_inflight(L.pipeline, L.virtual_stages, ga, self.stage)
        nl_live = nl * inflight
        # every forward runs before the stage's first backward (1F1B: micro-batches <= pp -
        # i), which starts with no gradients (set_to_none); the later ones hold one
        # micro-batch fewer beside the gradients (Megatron's schedule; tracing/pipeline.py)
        one_pass = L.pipeline > 1 and 1 < ga <= inflight and not self.legacy
        r = 4 if (self.mixed and not self.fsdp_mp) or self.p == 4 else self.p
        ckpt = self.sc.checkpointing or "none"
        if ckpt == "full":
            kept = 0 if "activations" in self.off or self.stack_offloads_blocks() \
                else nl_live * r * sbh_mean / blk.seq_div
            acts = kept + blk.layer_full
        elif ckpt == "selective":   # per rank: split by TP / SP as torchtitan's op SAC keeps
            sel = (selective_coeff(a, blk.k) if blk.tp <= 1
                   else sharding.tp_selective(a, blk.k, blk.tp, blk.sp))
            sel = sel - self.stack_selective_drop()   # attention recomputed (stack_hooks)
            acts = nl_live * sel * sbh_mean
            # a block's backward first recomputes what it did not keep (torch SAC replays the
            # block, taking the saved ops' outputs from its cache): one block's tensors live
            gathered = sharding.sac_gathered_inputs(blk.k, blk.tp, blk.sp)   # DTensor SP
            if gathered and not self.stack_dtensor_tp():   # Megatron's TP (stack_hooks)
                gathered = 0.0
            blk.recompute = vmax(0, blk.layer_full - sel * sbh) + gathered * sbh
        else:
            acts = nl_live * blk.layer_mean
        fmt = prec_mod.training_format(self.prec)
        if fmt:   # NVFP4: the converted linears' saved weight copies (lowp_training)
            acts = acts + lowp_training.saved_weight_bytes(a, fmt, ckpt, nl_live, L.tensor)
        per_mb = (kept if ckpt == "full" else acts) / inflight   # one micro-batch's blocks
        edges, head_side = self._edge_activations(blk, ckpt, r)
        acts = acts + edges
        if blk.encdec:
            self.notes.append(
                f"encoder-decoder: encoder blocks at seq_len ({self.s:,} tokens), decoder blocks "
                f"at target_len ({self.t:,}) with a cross-attention block each (q at target_len, "
                "each layer's k and v projected from the encoder output at seq_len); the LM "
                "head, logits and loss at target_len")
        blk.__dict__.update(acts=acts, per_mb=per_mb, ckpt=ckpt, one_pass=one_pass, ga=ga,
                            head_side=head_side, edges=edges, nl=nl,
                            bwd_tmp=self._block_backward(blk), layer_full=blk.layer_full,
                            logits=self.logits_peak(blk.Td, True) if self.last else 0)
        return blk

    def _edge_activations(self, blk, ckpt: str, r: int):
        """What the stage keeps outside its blocks, and the head side of it (the final
        norm's and the head's saved inputs, last stage): (bytes, head_side bytes)."""
        a, sbh = self.arch, blk.sbh
        if blk.encdec and self.first and self.last:
            return blk.stacks.edges, 0
        # embedding output (stage 0), final norm input and the (all-gathered) head input
        sbh0 = blk.T * a.hidden
        embed_out = self.first and not self._embed_is_block_input(ckpt)
        # the final norm saves what a block's norm does (HF RMSNorm: its fp32 copy and the
        # cast-back normed tensor, sharding.norm_saved), not its input
        head_side = (sharding.norm_saved(a, blk.k) * sbh / blk.seq_div + self.p * sbh
                     if self.last else 0)
        edges = (r * sbh0 if embed_out else 0) / blk.seq_div + head_side
        if self.first and a.dropout(True)[0] > 0:   # the embedding output's dropout mask
            edges = edges + sbh0 / blk.seq_div
        return edges, head_side

    def _embed_is_block_input(self, ckpt: str) -> bool:
        """Under full or selective checkpointing the first block's checkpoint keeps its input
        (torch/utils/checkpoint.py, non-reentrant `_checkpoint_without_reentrant_generator`:
        the recomputation replays the block from the inputs it holds; torchtitan wraps each
        block, torchtitan/distributed/activation_checkpoint.py `_apply_full_ac` /
        `_apply_op_sac`), and on the first stage that input is the embedding's output (the
        dropout's output where there is one; its mask is counted apart): already one of the
        block inputs counted per micro-batch (`kept`, selective_terms' block input), not a
        tensor of its own (where the block inputs are offloaded, as Unsloth's offloaded
        checkpointer copies `hidden_states` to the CPU, it is offloaded with them). Without
        checkpointing it stays a separate term, and so it does
        where an embedding norm (BERT's embeddings LayerNorm, BLOOM's word_embeddings_
        layernorm) saves it as its input before the block's input is made."""
        if (self.arch.extra or {}).get("embedding_norm"):
            return False
        return ckpt in ("full", "selective")   # offloaded block inputs: it goes with them

    def _block_coeffs(self, keep) -> SimpleNamespace:
        """Saved bytes of one block per rank (activations.layer_coeffs split by TP / SP in
        sharding.tp_layer; the eager score term over CP), the stage's mean block (encoder-
        decoder: encoder blocks at seq_len, decoder blocks at target_len) and the last one."""
        a, L = self.arch, self.L
        k = self.kernels(True)
        self._kernel_notes(k)
        T = self.tokens()
        sbh = T * a.hidden
        c, sc_coef = layer_coeffs(a, k, keep)
        if prec_mod.training_format(self.prec):   # NVFP4 saved linear inputs (lowp_training)
            c += lowp_training.saved_coeff_delta(a, prec_mod.training_format(self.prec), k,
                                                 keep or lowp_training.ALL_KEPT)
        dc, att_share = mixer_activations.layer_adjust(a, k, c, keep)   # layer kinds, qk-norm
        c, sc_coef = c + dc, sc_coef * att_share
        tp = L.tensor
        sp = tp > 1 and "sequence-parallel" in self.opts
        c, sc_coef = sharding.tp_layer(c, sc_coef, sharding.replicated_coeff(a, k, keep), tp, sp)
        c += self.stack_saved_coeff(keep)   # bitsandbytes fp32 input casts (stack_hooks)
        seq_div = tp if sp else 1     # block-boundary tensors: split along s with SP
        scores = sc_coef * self.b * a.heads * (self.s ** 2) / max(1, L.context)
        layer_full = c * sbh + scores
        layer_mean, sbh_mean = layer_full, sbh   # a block of this stage, on average
        encdec = a.kind == "encoder-decoder"
        Td = self.tokens(self.t)
        st = None
        if encdec:   # encoder blocks at seq_len, decoder blocks at target_len (encdec.py)
            st = encdec_mod.train_stacks(self, k, keep, c, sc_coef, tp, sp)
            Le, Ld = a.layers, a.decoder_layers
            layer_mean = (Le * st.enc_layer + Ld * st.dec_layer) / (Le + Ld)
            sbh_mean = (Le * T + Ld * Td) * a.hidden / (Le + Ld)
            layer_full = st.dec_layer   # the last block: backward starts there
            sbh = Td * a.hidden         # the head, the loss and the last block's backward
        return SimpleNamespace(k=k, T=T, Td=Td, sbh=sbh, sbh_mean=sbh_mean, tp=tp, sp=sp,
                               seq_div=seq_div, layer_full=layer_full, layer_mean=layer_mean,
                               encdec=encdec, stacks=st, keep=keep)

    def _block_backward(self, blk) -> float:
        """One block's backward temporaries: gradients of its widest tensors (split by TP), the
        all-gathered input of a column-parallel linear with SP, CP's ring buffers."""
        a, tp, sbh = self.arch, blk.tp, blk.sbh
        ffw = (a.moe_ffn * max(1, a.experts_per_token) if a.is_moe else a.ffn) / a.hidden
        kv_len = max(self.s, self.t) if blk.encdec else self.s   # the decoder's widest scores
        # the two block-width gradients run on the residual stream: whole on every TP rank
        # without SP (the replicated region, Korthikanti s.4), over t with SP
        tile = self.stack_mlp_tile(blk.T)   # Unsloth's tiled MLP: f-wide tensors per tile
        mlp_sbh = sbh if tile is None else tile * a.hidden
        n_f = self.stack_mlp_grads()   # 1 under Unsloth's LoRA_MLP (in place; stack_hooks)
        bwd_tmp = n_f * self.p * ffw * mlp_sbh / tp + 2 * self.p * sbh / blk.seq_div + (
            2 * self.p * self.b * a.heads * self.t * kv_len / tp
            if blk.k.attention == "eager" else 0)
        if tile is not None:   # the tile's recomputed MLP tensors (stack_hooks)
            bwd_tmp += self.stack_mlp_coeff(blk.k, blk.keep) * mlp_sbh / tp
        if tp > 1:   # SP: the all-gathered full-sequence input of a column-parallel linear;
            bwd_tmp += self.p * sbh   # TP alone: its input gradient's partial sum (all-reduced)
        if not blk.encdec and blk.keep is None:   # or the second norm's backward (sharding)
            bwd_tmp = vmax(bwd_tmp, sharding.norm_backward_extra(a, blk.k, tp, blk.sp) * sbh)
        bwd_tmp += sharding.ring_buffers(a, self.p, blk.T, tp, self.L.context)
        if a.is_moe and self.L.expert > 1:   # one layer's all-to-all receive buffers
            bwd_tmp += self.expert_a2a_bytes(blk)
        if prec_mod.training_format(self.prec):   # casted operands of one linear's backward
            bwd_tmp += lowp_training.cast_temporary_bytes(
                a, prec_mod.training_format(self.prec), blk.T, tp)
        return bwd_tmp

    def expert_a2a_bytes(self, blk) -> float:
        """Expert parallel: Megatron-Core's MoEAlltoAllTokenDispatcher (transformer/moe/
        token_dispatcher.py) permutes a layer's T k routed token copies, all-to-alls them
        into a new receive buffer and sorts them by local expert (one more copy), and runs
        the same in reverse to combine: beside the permuted copies every MoE layer already
        keeps (activations.py), the backward of one layer holds a dispatch receive and a
        combine send buffer of T k h (T: this rank's tokens, over TP with SP), dropless
        routing, balanced on average (no capacity factor)."""
        a = self.arch
        return 2 * self.p * blk.T * a.experts_per_token * a.hidden / blk.seq_div

    def _kernel_notes(self, k) -> None:
        """Say which of the config's kernel facts changed the saved activations."""
        a = self.arch
        hid, att = a.dropout(True)
        if k.dropout:
            self.notes.append(
                f"train-mode dropout from the config (hidden {hid:g}, attention {att:g}): a "
                "1-byte mask per element of every dropped tensor (two hidden masks per block"
                + (", one per attention probability under eager attention" if att > 0 else "")
                + (", one inside the MLP before wo (HF T5)" if inner_dropout(a) else "")
                + "); a probability of 0 keeps no mask (torch returns the input)")
        elif any(hf_config.default_dropout(a.model_type)):
            self.notes.append(f"dropout 0 in this {a.model_type} config (its HF class defaults "
                              "to dropout): no dropout masks kept")
        if k.legacy and k.attention == "eager":
            self.notes.append("torch 1.x stack (before 1.11): softmax keeps its input (the "
                              "scores) for backward as well as its output (pytorch/pytorch"
                              "#64000, fixed by #66018): one more score-sized tensor per layer")
        if not a.gated_mlp and saves_output(a):
            self.notes.append(f"MLP activation {a.activation}: its backward reads its output, "
                              "which is also fc2's saved input: one f-wide tensor per block, "
                              "not two")
