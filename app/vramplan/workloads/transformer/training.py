"""Transformer training phases per GPU: forward end, start of backward (the loss backward with
the logits buffers), optimizer step; per pipeline stage when the layout has one (parallel.py,
sharding.py). A mixin of footprint._Ctx, which holds the scenario's shared quantities; the
saved activations of a stage are stage_activations.py's."""
from __future__ import annotations

from types import SimpleNamespace

from ... import optimizers as opt_mod
from ... import parallel as par
from ... import precision as prec_mod
from ...errors import ScenarioError
from ...hardware.capabilities import compute_dtype
from ...vec import isin, to_int, truth, vmax, where
from ...vec import peak as peak_of
from ..base import Footprint
from . import formats, lowp_training, sharding, traffic
from .activations import upcasts_softmax
from .family import lora_head
from .lora import lora_modules
from .stage_activations import StageActivations


class Training(StageActivations):
    """Training methods of footprint._Ctx (uses its fields: sc, arch, L, b, s, p, mixed, ...)."""

    # ---- training ------------------------------------------------------------------------
    def set_stage(self, i: int) -> None:
        """Pipeline stage i of pp: its blocks, the embedding on stage 0, the head (a copy when
        tied) on the last stage."""
        pp, tp = self.L.pipeline, self.L.tensor
        self.stage, self.first, self.last = i, i == 0, i == pp - 1
        self.embed_g = int(((self._emb if self.first else 0)
                            + (self._head if self.last else 0)) / tp)
        self.params_g = self.blocks_g + self.norms_g + self.embed_g

    def train(self) -> Footprint:
        pp, ep = self.L.pipeline, self.L.expert
        if ep > 1 and self.arch.is_moe:
            self.notes.append(
                f"expert parallel {ep}: each rank holds {self.arch.num_experts // ep} of the "
                f"{self.arch.num_experts} routed experts per MoE layer (their weights, "
                "gradients and optimizer states / ep; under ZeRO sharded over data x context "
                "/ ep, Megatron-Core's expert-data group) and one layer's all-to-all dispatch "
                "and combine buffers in backward")
        if pp <= 1:
            return self.train_stage()
        base, ranks = list(self.notes), {}
        for i in sharding.stages(pp):
            self.set_stage(i)
            self.notes = list(base)
            ranks[sharding.stage_name(i, pp)] = self.train_stage()
        worst = max(ranks, key=lambda k: ranks[k].peak_allocated_bytes)
        fp = ranks[worst]
        v = self.L.virtual_stages
        held = ("min(pp - i, micro-batches) micro-batches in flight" if v <= 1 else
                f"{v} chunks interleaved, (2 (pp - i - 1) + (v - 1) pp + 1) / v micro-batches' "
                "worth in flight (Megatron-Core interleaved 1F1B)")
        fp.notes.append(
            f"pipeline {pp} ({'1F1B' if v <= 1 else 'interleaved 1F1B'}): each stage holds "
            f"{par.stage_layers(self.arch.total_layers, pp)} blocks and {held}; stage 0 the "
            "embedding, the last stage the head, logits and loss; per_gpu is the worst stage, "
            f"{worst} (every stage: the ranks section)")
        fp.ranks = ranks
        return fp

    def train_stage(self) -> Footprint:
        """One pipeline stage's training step (the only stage without PP): the model states per
        rank, the saved activations, the phases and the traffic per step."""
        if prec_mod.training_format(self.prec):   # MXFP8 / NVFP4 linears (lowp_training)
            lowp_training.check(self.sc, self.arch)
            self.notes.append(lowp_training.note(self.arch, self.prec,
                                                 prec_mod.training_format(self.prec)))
        ms = self._model_states()
        ac = self._stage_activations(ms.keep)
        phases = self._train_phases(ms, ac)
        return self._stage_footprint(ms, ac, phases)

    def _model_states(self) -> SimpleNamespace:
        """Weights, gradients, optimizer states and the step's temporary per rank: ZeRO shards
        (parallel.shard_divisors), LoRA's frozen base beside its adapters, offload."""
        sc, L = self.sc, self.L
        optim = self.stack_optimizer(sc.optimizer or "adamw")   # stack default (stack_hooks)
        lora = sc.task in ("lora", "qlora")
        div = par.shard_divisors(L.zero, L.shard_group)
        opt_off = "optimizer" in self.off
        par_off = "params" in self.off
        pb = prec_mod.param_bytes(self.prec)
        ms = self._trainable(lora, div, pb)
        grads_full = par.shard(ms.tb * self._zero_count(ms.n_train, div["gradients"], lora),
                               div["gradients"]) + self._replicated_embedding_grad(ms.tb, lora)
        states = par.shard(opt_mod.state_bytes(
            optim, self._zero_count(ms.n_train, div["optimizer_states"], lora), ms.tb,
            self._matrices(lora), self.stack_bnb_block(optim)), div["optimizer_states"])
        paged = optim == "paged-adamw-8bit"
        if opt_off:
            states = 0
        if par_off and L.zero < 3:
            raise ScenarioError(
                "offload", f"'params' needs sharded parameters: set parallel.zero to 3 (FSDP "
                f"FULL_SHARD with CPUOffload(offload_params=True), or DeepSpeed ZeRO-3 with "
                f"offload_param / ZeRO-Infinity; one GPU works too: gpus 1, zero 3). With zero "
                f"{L.zero}, PyTorch DDP / DeepSpeed ZeRO-{L.zero} keep every parameter on the GPU")
        weights = ms.weights
        if par_off:   # FSDP CPUOffload(offload_params=True): gradients and the step on the CPU
            weights = states = grads_full = 0
        impl = "loop" if self.legacy else "foreach"
        if "fused-optimizer" in self.opts:
            impl = "fused"
        in_bwd = "optimizer-in-backward" in self.opts
        # optimizer in backward: one optimizer per parameter, stepped in its post-accumulate-
        # grad hook (torchtune `{p: instantiate(cfg_optimizer, [p])}`; PyTorch's "optimizer step
        # in backward" tutorial), so a foreach step's temporaries cover one tensor at a time
        step_impl = "loop" if in_bwd and impl == "foreach" else impl
        step_tmp = 0 if (opt_off or par_off) else par.shard(
            opt_mod.step_temporary_bytes(optim, ms.n_train, ms.tb, ms.largest, step_impl),
            div["optimizer_states"] if step_impl == "foreach" else 1)
        ms.__dict__.update(weights=weights, grads_full=grads_full, states=states, paged=paged,
                           step_tmp=step_tmp, impl=impl, in_bwd=in_bwd, optim=optim, lora=lora,
                           opt_off=opt_off, par_off=par_off, pb=pb)
        return ms

    def _replicated_embedding_grad(self, tb: int, lora: bool) -> int:
        """Bytes the input embedding's gradient adds beyond its vocabulary shard on a TP rank
        under `checkpointing: selective`, where the estimate follows torchtitan (its op SAC)
        and so its DTensor TP plan: the embedding is RowwiseParallel (weight Shard(0) over the
        vocabulary; torchtitan/models/llama3/parallelize.py `apply_tp`), and DTensor has no
        row-wise strategy for its backward (torch 2.13 torch/distributed/tensor/_ops/
        _embedding_ops.py `embedding_dense_backward_strategy`: column-wise, batch-sharded
        Partial or Replicate), so `.grad` is the whole V x h table on every TP rank, held
        until the step. FSDP2 (ZeRO-3 over data) redistributes it to the parameter's
        placement (_fsdp_param.py `_get_grad_inner_tensor`); torchtitan runs no DDP with TP.
        0 elsewhere, and on a stack with Megatron's TP (stack_dtensor_tp): its
        VocabParallelEmbedding keeps the shard. Traced: toy Llama TP4 x PP2 stage 0, DTensor
        style (tests/test_trace_parallel.py)."""
        L = self.L
        if (lora or not self.first or L.tensor <= 1 or (self.sc.checkpointing or "none")
                != "selective" or (L.zero >= 2 and L.shard_group > 1)
                or not self.stack_dtensor_tp()):
            return 0
        return int(tb * self._emb * (1 - 1 / L.tensor))

    def _zero_count(self, n: int, divisor: int, lora: bool) -> int:
        """Parameters a ZeRO divisor shares out: with expert parallelism the routed experts
        are sharded over the expert-data group (data x context / ep; Megatron-Core's
        distributed optimizer, torchtitan's dp_shard_mod_ep mesh), so a sharded component
        per rank is the whole stage's over data x context: add back the experts the other
        EP ranks hold (ep_extra_g); unsharded, a rank holds its 1/ep of the experts."""
        return n + self.ep_extra_g if divisor > 1 and not lora else n

    def _ep_base_extra(self, fmt: str, div: dict) -> int:
        """A frozen base sharded by ZeRO-3 with EP: the experts the other EP ranks hold come
        back into the shared-out bytes (as _zero_count), in the base's format."""
        if div["weights"] <= 1 or not self.ep_extra_g:
            return 0
        return int(self.ep_extra_g * formats.expert_bytes_per_param(self.arch, fmt))

    def _trainable(self, lora: bool, div: dict, pb: int) -> SimpleNamespace:
        """What trains: the whole stage, or (LoRA / QLoRA) adapters on a frozen base in its
        storage format. weights per rank, trained parameter count n_train, their bytes tb, the
        largest trained tensor, `keep` (which frozen linears keep their input), fmt (LoRA)."""
        sc, a = self.sc, self.arch
        if not lora:
            return SimpleNamespace(keep=None, n_train=self.params_g, tb=pb, fmt=None,
                                   weights=par.shard(pb * self._zero_count(
                                       self.params_g, div["weights"], False), div["weights"]),
                                   largest=self.largest_param)
        fmt = "nf4" if sc.task == "qlora" and not prec_mod.is_quantized(self.prec) else self.prec
        base = self.base_weight_bytes(fmt)
        keep, mats = lora_modules(a, sc.lora.targets if sc.lora else ("q_proj", "v_proj"))
        keep = self.stack_keep(keep, fmt)   # bitsandbytes 4-bit saving its input (stack_hooks)
        n_train = self._adapter_params(mats) + self._head_adapter_params()
        tb = self._adapter_dtype()
        self.notes.append("LoRA: frozen base in its precision; adapters, their gradients and "
                          f"optimizer states in {tb * 8}-bit (torchtune / PEFT<0.12 "
                          "convention); frozen linears keep no input for backward unless "
                          "adapted")
        return SimpleNamespace(keep=keep, n_train=n_train, tb=tb, fmt=fmt,
                               weights=par.shard(base + self._ep_base_extra(fmt, div),
                                                 div["weights"]) + n_train * tb,
                               largest=max(i * o for i, o in mats) if mats else 0)

    def _train_phases(self, ms, ac) -> dict:
        """forward end, backward start (the loss's backward and one block's), the later
        backwards of a one-pass 1F1B stage, the optimizer step (or the end of backward)."""
        a, L, lora = self.arch, self.L, ms.lora
        cast_cache = self._cast_cache(lora)
        fsdp_ws, fsdp_root = self._fsdp_working_set(ms)
        persist = ac.ga > 1 or self.legacy
        grads_at_bwd = ms.grads_full if persist and not ac.one_pass else 0
        held_grad = 0
        if ms.in_bwd:
            grads_at_bwd = 0
            # a tied embedding's gradient accumulates from the head and the input embedding, so
            # it is held through the whole backward before its update can run
            held_grad = ms.tb * (self.embed_g if a.tied_embeddings and not lora else ms.largest)
        ckpt_cache = cast_cache if ac.ckpt != "full" else 0
        # full checkpointing: the loss's and the head's backward run before the last block is
        # recomputed (torch.utils.checkpoint unpacks a block's saved tensors when its backward
        # starts), so the recomputed block and its gradients come after the loss buffers are gone
        recomputed = ac.layer_full if ac.ckpt == "full" else 0
        bwd_block = ac.bwd_tmp + recomputed + (ac.recompute if ac.ckpt == "selective" else 0) \
            + self.stack_dequant_bytes(ms.fmt)   # bnb fp32 compute (stack_hooks)
        # the head's and the final norm's backward run before any block's, freeing what they
        # saved: a block's backward runs without them (traced: tests/test_trace_parallel.py)
        bwd_block = bwd_block - ac.head_side
        head_grad, bwd_extra = self._head_grad(ac.Td, ms.tb, ac.logits, bwd_block, lora,
                                               persist or ms.in_bwd or L.zero >= 2)
        bwd_acts = ac.acts - recomputed + bwd_extra
        w, st = ms.weights, ms.states
        fwd_end = {"weights": w, "gradients": grads_at_bwd + held_grad,
                   "optimizer_states": st, "activations": to_int(ac.acts),
                   "temporary": cast_cache + fsdp_ws}
        # FSDP: the loss's backward runs before any block's, beside the gathered root unit only
        # (FSDP2 unshards a block in its pre-backward); a block's backward adds its gathered
        # unit, the prefetched one and its unsharded gradients (tracing/plan.py, 2-D trace)
        bwd_fsdp = fsdp_root + vmax(0, bwd_block + fsdp_ws - fsdp_root - bwd_extra)
        bwd = {"weights": w, "gradients": grads_at_bwd + held_grad + head_grad,
               "optimizer_states": st, "activations": to_int(bwd_acts),
               "temporary": ckpt_cache + bwd_fsdp}
        phases = {"forward": fwd_end, "backward": bwd}
        last = self._first_block_backward(ms, ac, persist, bwd_block + ac.head_side)
        if last is not None:
            phases["backward-later"] = dict(last, weights=w, optimizer_states=st,
                                                  temporary=ckpt_cache + fsdp_ws)
        if ac.one_pass:
            phases["backward-later"] = dict(bwd, gradients=ms.grads_full + held_grad,
                                            activations=to_int(bwd_acts - ac.per_mb))
        if not ms.in_bwd and ms.optim != "none":
            phases["optimizer-step"] = {"weights": w, "gradients": ms.grads_full,
                                        "optimizer_states": st, "temporary": ms.step_tmp}
        else:
            phases["backward-end"] = {"weights": w,
                                      "gradients": ms.grads_full if not ms.in_bwd else held_grad,
                                      "optimizer_states": st,
                                      "temporary": fsdp_ws + (ms.step_tmp if ms.in_bwd else 0)}
        ms.persist = persist
        return phases

    def _cast_cache(self, lora) -> int:
        """autocast keeps 16-bit copies of the linear weights (cached during forward, saved by
        each linear for its backward); FSDP mixed precision: all-gathered 16-bit units instead.
        LoRA on a full-precision base: autocast caches no cast of a frozen weight, but each
        frozen linear saves its own 16-bit weight cast for the input gradient (traced:
        transformers T5 + tracing/lora.py, one 16-bit copy per block linear)."""
        if not self.mixed or self.fsdp_mp:
            return 0
        frozen_cast = lora and self.sc.task == "lora" and not prec_mod.is_quantized(self.prec)
        return 2 * self.blocks_g if (not lora or frozen_cast) else 0

    def _first_block_backward(self, ms, ac, persist: bool, block_bwd) -> dict | None:
        """The stage's first block runs its backward last: with gradients made in backward
        (set_to_none, one micro-batch) every other parameter's gradient is allocated by then
        (autograd's AccumulateGrad as each weight's backward runs; ZeRO-2/3 shards them as
        they come), beside that block's saved tensors (its checkpointed input), the stage's
        edge tensors but the head's (the embedding output on stage 0), and the block's
        recomputation and backward temporaries (`block_bwd`). The phase is "backward-later"
        (one-pass 1F1B, which names its own so, is excluded). Traced: toy Llama, one GPU,
        full checkpointing (-4.7 % before this phase: tests/test_trace_parallel.py).
        None where gradients persist from the start of backward (the backward phase has
        them all), with optimizer-in-backward, encoder-decoders, a one-block stage or one-
        pass 1F1B."""
        if (persist or ms.in_bwd or ac.one_pass or ac.encdec or ac.nl < 2
                or "activations" in self.off):
            return None
        if ms.lora:   # the adapters of one block are still to come
            done = ms.grads_full * (1 - 1 / ac.nl)
        else:
            left = self.layer_params + (self._emb / self.L.tensor if self.first else 0)
            made = ms.grads_full - self._replicated_embedding_grad(ms.tb, False)   # not yet
            done = made * vmax(0, self.params_g - left) / max(1, self.params_g)
        acts = ac.per_mb / ac.nl + ac.edges - ac.head_side + block_bwd
        return {"gradients": to_int(done), "activations": to_int(acts)}

    def _fsdp_working_set(self, ms) -> tuple[int, int]:
        """ZeRO-3 / FSDP: (the gathered units live in a block's backward, the root unit, head /
        embedding, that stays gathered); (0, 0) without parameter sharding."""
        if not (self.L.zero >= 3 and (self.L.shard_group > 1 or ms.par_off)):
            return 0, 0
        cb = 2 if (self.mixed or self.p == 2) else 4
        ws = par.fsdp_unsharded_bytes(self.layer_params, cb, 0 if ms.lora else ms.pb)
        root = self.stack_fsdp_root() * cb   # embeddings + head (stack_hooks: torchtitan's units)
        return ws + root, root

    def _stage_footprint(self, ms, ac, phases) -> Footprint:
        """The peak over the phases, the stage's notes, paged states outside the allocator and
        the bytes / FLOPs per step."""
        peak, comps = peak_of(phases)   # per element for a sweep's batch axis (vramplan.vec)
        self._train_notes(ms.optim, ms.impl, ms.persist, ms.paged, ms.lora)
        if ms.par_off:
            self.notes.append("offload 'params' with ZeRO-3: FSDP CPUOffload(offload_params="
                              "True) (DeepSpeed ZeRO-Infinity with offload_param and "
                              "offload_optimizer alike): parameters, their gradients and the "
                              "optimizer step live on the CPU; each unit is copied in and "
                              "gathered for its forward and backward, so the GPU holds the unit "
                              "being computed, one prefetched and the unit's unsharded gradients "
                              "before they go to the CPU (temporary)")
        # the largest tensor live at the peak: after backward only parameter-sized ones remain
        big = where(isin(peak, ("optimizer-step", "backward-end")), ms.largest * ms.tb,
                    vmax(where(ac.logits, ac.logits / 3, 0), ac.layer_full / 8,
                         ms.largest * ms.tb))
        fp = self._fp(comps, peak, phases, to_int(big))
        if ms.paged and not ms.opt_off:  # bitsandbytes paged states live in CUDA unified memory
            for ph in phases.values():
                ph["optimizer_states"] = 0
            fp.components["optimizer_states"] = 0
            fp.extra_device_bytes["paged_optimizer_states"] = ms.states
        fp.bandwidth = self._train_traffic(ms, ac)
        return fp

    def _train_traffic(self, ms, ac) -> dict:
        """Bytes, tokens and FLOPs per optimizer step (timing's roofline)."""
        ga, L = ac.ga, self.L
        # each forward / backward pass reads the weights it computes with: under ZeRO-3 the
        # all-gathered 16-bit units (the whole stage passes through the working set)
        w_pass = ms.weights
        if L.zero >= 3 and (L.shard_group > 1 or ms.par_off):
            cb = 2 if (self.mixed or self.p == 2) else 4
            w_pass = self.base_weight_bytes(ms.fmt) if ms.lora else self.params_g * cb
        steps_bytes = (w_pass * (3 if ac.ckpt == "full" else 2) + 2 * ms.grads_full) * ga \
            + 2 * (ms.states + ms.weights + ms.grads_full) + 2 * to_int(ac.acts) * ga
        bw = {"bytes_per_step": to_int(steps_bytes), "tokens_per_step": ac.T * ga,
              "flops_per_step": traffic.train_flops(self, self.b * self.s * ga, ms.lora,
                                                    ac.ckpt),
              "compute_dtype": compute_dtype(self.prec, self.opts)}
        if ms.par_off:
            bw["host_link_bytes_per_step"] = int(
                2 * self.params_g * ms.pb / max(1, L.shard_group))   # each shard in, fwd and bwd
        return bw

    def _head_grad(self, T, tb, logits, bwd_tmp, lora, held_elsewhere) -> tuple[int, float]:
        """(the output projection's weight gradient at the backward peak, the activation bytes
        beside it). Backward starts at the loss, so the head's weight gradient is the first one
        made; with gradients freed between steps (set_to_none) and kept whole (no ZeRO-2/3) it
        stays live from then on. A chunked loss projects chunk by chunk, so it appears while
        every other chunk's saved logits are alive; after a whole-vocabulary cross-entropy its
        buffers are gone and the logits' gradient (16-bit, cast back) remains beside it."""
        a = self.arch
        if not self.last or lora or held_elsewhere or a.kind == "encoder" or not truth(logits):
            return 0, vmax(logits, bwd_tmp)
        g = int(tb * self._head / self.L.tensor)
        self.notes.append("backward: the output projection's weight gradient is made first (right "
                          "after the loss) and stays live through the rest of backward")
        if "chunked-loss" in self.opts:
            return g, vmax(logits, bwd_tmp)
        V = a.vocab // (self.L.tensor if "loss-parallel" in self.opts else 1)
        upcast = self.p == 4 or self.mixed or upcasts_softmax(a.model_type)
        at_head = self.p * T * V + (0 if upcast else self.p * T * V)
        return g, vmax(logits - g, at_head, bwd_tmp)

    def _head_adapter_params(self) -> int:
        """LoRA on the output projection (`lm_head`, torchtune `output`, ...; family.lora_head):
        r * (h + V) adapter parameters once, on the stage that holds the head. Its input, the
        T x h head input, is already counted beside the logits."""
        head = lora_head(self.arch, self.sc.lora.targets if self.sc.lora else ())
        if head is None or not self.last:
            return 0
        self.notes.append("LoRA on the output projection: r x (hidden + vocab) adapter "
                          "parameters, their gradients and optimizer states (PEFT target "
                          "'lm_head', torchtune apply_lora_to_output, litgpt lora_head)")
        return int(self.sc.lora.rank * sum(head) / self.L.tensor)

    def _matrices(self, lora: bool):
        """(rows, cols, count) of the 2-D weights, for Adafactor's factored second moment."""
        a = self.arch
        if lora:
            return None
        h, q, kv = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim
        f = a.ffn
        per = [(q, h, 1), (kv, h, 2), (h, q, 1), (f, h, 3 if a.gated_mlp else 1),
               (h, f, 1)]
        L = a.total_layers
        mats = [(r, c, n * L) for r, c, n in per]
        mats.append((a.vocab, h, 1 if a.tied_embeddings else 2))
        return mats

    def _train_notes(self, optim, impl, persist, paged, lora):
        prec = self.prec
        if self.mixed and not self.fsdp_mp:
            self.notes.append(f"{prec}: PyTorch AMP convention: fp32 parameters + fp32 "
                              "gradients + fp32 optimizer states (16 B/param with Adam), and "
                              "autocast's 16-bit copies of the linear weights cached during "
                              "forward")
        elif self.fsdp_mp:
            self.notes.append(f"{prec} with FSDP: fp32 sharded parameters, gradients and states; "
                              "16-bit all-gathered units and 16-bit compute")
        elif prec in ("bf16", "fp16") and not lora:
            self.notes.append(f"pure {prec}: torch optimizers keep states in the parameter dtype "
                              "(AdamW: 2 + 2 + 2x2 = 8 B/param)")
        if optim in ("adam", "adamw"):
            self.notes.append({"foreach": "Adam foreach (CUDA default since torch 2.0): one "
                                          "temporary copy of exp_avg_sq at the step",
                               "fused": "fused Adam: no step temporary",
                               "loop": "Adam per-tensor loop (torch 1.x / transformers AdamW): "
                                       "one parameter's temporary at the step"}[impl])
        if persist:
            self.notes.append("gradients stay allocated across micro-batches / zero_grad without "
                              "set_to_none (torch 1.x) and are live during forward")
        if paged:
            self.notes.append("paged 8-bit states live in CUDA unified memory (not in torch's "
                              "allocator); they can be evicted to host under memory pressure")
        if self.legacy:
            self.notes.append("pre-Ampere GPU: the torch 1.x-era stack is assumed (eager CUDA "
                              "module loading, per-tensor optimizer loop, zero_grad to zeros)")
