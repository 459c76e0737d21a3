"""Transformers (decoder, encoder, encoder-decoder): what a job holds per GPU at its peak.

Phases are computed separately and the peak is the largest phase (not a sum of maxima):
training: forward end, start of backward (the loss backward with the logits buffers), optimizer
step; generate: prefill vs the last decode step; serve: a vLLM-style engine (weights + profiled
activations + the pre-allocated KV pool); forward: one no_grad pass; load: weights resident.
Conventions (PyTorch semantics, say what is assumed) are recorded in Footprint.notes.
"""
from __future__ import annotations

from ... import optimizers as opt_mod
from ... import runtime
from ... import parallel as par
from ... import precision as prec_mod
from ...errors import ScenarioError
from ...hardware.capabilities import compute_dtype, plan_warnings
from ..base import Footprint
from . import traffic
from . import sharding
from .activations import (Kernels, dropout_flags, inference_coeff, layer_coeffs,
                          score_bytes_inference, selective_coeff, upcasts_softmax)

MiB = 2**20
# Modules LoRA target names map to (HF Llama, GPT-2, BERT, T5, Falcon/NeoX/BLOOM names).
LORA_GROUPS = {
    "qkv": {"q_proj", "k_proj", "v_proj", "q", "k", "v", "query", "key", "value", "c_attn",
            "query_key_value", "qkv_proj", "wq", "wk", "wv", "qkv"},
    "o": {"o_proj", "o", "out_proj", "output_proj", "wo_attn", "attn.c_proj", "dense"},
    "up": {"gate_proj", "up_proj", "w1", "w3", "c_fc", "fc1", "wi", "wi_0", "wi_1",
           "dense_h_to_4h", "intermediate.dense", "gate_up_proj"},
    "down": {"down_proj", "w2", "fc2", "wo", "mlp.c_proj", "c_proj", "dense_4h_to_h",
             "output.dense"},
}


def lora_modules(arch, targets) -> tuple[dict, list[tuple[int, int]]]:
    """Which linear groups carry adapters, and the (in, out) of each adapted matrix per layer."""
    t = {x.lower() for x in targets}
    allin = bool(t & {"all-linear", "all_linear", "all"})
    keep = {g: allin or bool(t & names) for g, names in LORA_GROUPS.items()}
    h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    f = arch.moe_ffn if arch.is_moe else arch.ffn
    dims = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h),
            "gate": (h, f), "up": (h, f), "down": (f, h)}
    names = {"q": {"q_proj", "q", "query", "wq"}, "k": {"k_proj", "k", "key", "wk"},
             "v": {"v_proj", "v", "value", "wv"}, "o": LORA_GROUPS["o"],
             "gate": {"gate_proj", "w1", "wi_0"}, "up": {"up_proj", "w3", "c_fc", "fc1", "wi",
                                                        "wi_1", "dense_h_to_4h"},
             "down": LORA_GROUPS["down"]}
    fused = {"c_attn", "query_key_value", "qkv_proj", "qkv"}
    mats = []
    for m, (i, o) in dims.items():
        if m == "gate" and not arch.gated_mlp:
            continue
        if allin or t & names[m] or (m in "qkv" and t & fused):
            mats.append((i, o))
    return keep, mats


def _legacy(scenario, device) -> bool:
    return runtime.legacy_stack(scenario, device)


def footprint(scenario, spec, device) -> Footprint:
    arch = spec.arch
    task = scenario.task
    prec = scenario.precision_for("default")
    if isinstance(prec, dict):  # pragma: no cover - precision_for returns a str
        prec = prec.get("default", "bf16")
    ctx = _Ctx(scenario, arch, device, prec)
    ctx.notes += plan_warnings(device, precisions=(prec,), attention=scenario.attention,
                               options=scenario.options, compute=task != "load")
    if "params" in ctx.off and task not in ("train", "lora", "qlora"):
        ctx.check_inference_offload()
    if task in ("train", "lora", "qlora"):
        return ctx.train()
    if task == "generate":
        return ctx.generate()
    if task == "serve":
        return ctx.serve()
    if task == "forward":
        return ctx.forward()
    return ctx.load()


class _Ctx:
    """Shared quantities of one scenario (parameter split, layout, dtypes)."""

    def __init__(self, sc, arch, device, prec):
        self.sc, self.arch, self.dev, self.prec = sc, arch, device, prec
        self.opts = set(sc.options or ())
        self.off = set(sc.offload or ())
        self.L = par.layout_of(sc.parallel)
        self.notes: list[str] = []
        self.b = int(sc.batch_size or 1)
        self.s = int(sc.seq_len or 1)
        bd = arch.param_breakdown()
        L, tp, pp = arch.total_layers, self.L.tensor, self.L.pipeline
        self.stage_frac = par.stage_layers(L, pp) / L
        blocks = bd["attention"] + bd["mlp"] + bd["router"] + bd["pooler"]
        emb = bd["embeddings"] + bd["position_embeddings"]
        head = bd["lm_head"]
        self.blocks_g = int(blocks * self.stage_frac / tp)
        self.norms_g = int(bd["norms"] * self.stage_frac)
        if pp > 1:  # stage 0 holds the embeddings, the last stage the head (tied: a copy)
            self.embed_g = int(max(emb, head if head else arch.vocab * arch.hidden) / tp)
        else:
            self.embed_g = int((emb + head) / tp)
        self.params_g = self.blocks_g + self.norms_g + self.embed_g
        tied_copy = arch.vocab * arch.hidden if arch.kind != "encoder" else 0
        self._emb, self._head = emb, (head or tied_copy)   # last stage: head, a copy when tied
        self.stage, self.first, self.last = 0, True, True
        self.layer_params = int(blocks / max(1, L) / tp)
        self.largest_param = int(max(arch.vocab * arch.hidden / tp,
                                     arch.hidden * max(arch.ffn, arch.moe_ffn) / tp))
        self.p = prec_mod.activation_bytes(prec)
        self.mixed = prec_mod.is_mixed(prec)
        self.legacy = _legacy(sc, device)

    # ---- helpers -------------------------------------------------------------------------
    def base_weight_bytes(self, fmt: str | None = None) -> int:
        fmt = fmt or self.prec
        return prec_mod.weights_bytes(self.blocks_g, self.norms_g + self.embed_g, fmt)

    def resident_weight_bytes(self, fmt: str | None = None) -> int:
        """Weights on the GPU between steps: all of them, or with offload 'params' at inference
        (accelerate cpu_offload) the largest module's, copied in for its forward."""
        if "params" in self.off:
            fmt = fmt or self.prec
            per = 2 if (self.p == 2 or prec_mod.is_quantized(fmt)) else self.p
            return int(self.largest_param * per)
        return self.base_weight_bytes(fmt)

    def check_inference_offload(self) -> None:
        if self.sc.task == "serve":
            raise ScenarioError("offload", "'params' offload is not modelled for serve: vLLM "
                                "offloads a stated amount (--cpu-offload-gb), which no scenario "
                                "key gives; drop 'params' or estimate task 'generate'")
        self.notes.append("offload 'params' at inference: accelerate cpu_offload / a device_map "
                          "with CPU offload; weights stay in CPU memory and each module's "
                          "weights are copied to the GPU for its forward, so the GPU holds the "
                          "largest module's at a time and every step moves all weights over "
                          "the host link (host_link_bytes_per_step; PCIe-bound, far slower "
                          "than the HBM floor)")

    def _offload_bw(self, bw: dict, w: int) -> dict:
        if "params" in self.off:
            bw["host_link_bytes_per_step"] = int(w)
        return bw

    def kernels(self, training: bool) -> Kernels:
        att = self.sc.attention or "sdpa"
        hid, _ = dropout_flags(self.arch.model_type, training)
        return Kernels(p=self.p, mixed=self.mixed and not self.fsdp_mp, attention=att,
                       dropout=hid, compile="compile" in self.opts,
                       float8="float8-linears" in self.opts)

    @property
    def fsdp_mp(self) -> bool:
        """FSDP (ZeRO-3) with a mixed-precision policy: parameters all-gathered in 16 bit and the
        model computes in 16 bit (no autocast, 16-bit residual stream)."""
        return self.mixed and self.L.zero >= 3

    def tokens(self, seq: int | None = None) -> int:
        return self.b * (seq or self.s) // max(1, self.L.context)

    def logits_peak(self, tokens: int, training: bool) -> int:
        """Bytes of the LM head output and loss at their peak (encoders: a small task head)."""
        a = self.arch
        if a.kind == "encoder":
            return 0
        V = a.vocab // (self.L.tensor if "loss-parallel" in self.opts else 1)
        TV = tokens * V
        upcast = self.p == 4 or self.mixed or upcasts_softmax(a.model_type)
        lt = 4 if upcast else self.p
        if not training:
            return TV * (self.p + (4 if upcast and self.p != 4 else 0))
        if "chunked-loss" in self.opts:
            chunk = 3 * 4 * TV // 8     # one of 8 chunks: log-softmax out, its grad, input grad
            if "compile" in self.opts:  # compiled CE saves the 16-bit chunk logits and the lse;
                # its fused backward writes the 16-bit input gradient of one chunk at a time
                return self.p * TV + 2 * self.p * TV // 8
            return 4 * TV + chunk       # every chunk's fp32 log-softmax output is saved
        # standard CE at the start of backward: log_softmax output, its gradient and the input
        # gradient (three lt-byte buffers); HF models without upcast also return the logits
        held = 0 if upcast else self.p * TV
        return 3 * lt * TV + held

    # ---- tasks ---------------------------------------------------------------------------
    def load(self) -> Footprint:
        w = self.resident_weight_bytes()
        lora_b = 0
        if self.sc.lora is not None:
            _, mats = lora_modules(self.arch, self.sc.lora.targets)
            lora_b = self._adapter_bytes(mats)
        # load_state_dict copies one tensor at a time: the largest one is briefly doubled
        tmp = self.largest_param * (2 if self.p == 2 or prec_mod.is_quantized(self.prec) else 4)
        comps = {"weights": w + lora_b, "temporary": tmp}
        self.notes.append("load: weights resident; the largest tensor is briefly held twice "
                          "while the state dict is copied in")
        return self._fp(comps, "load", {"load": dict(comps)}, tmp)

    def _adapter_bytes(self, mats) -> int:
        n = self._adapter_params(mats)
        return n * self._adapter_dtype()

    def _adapter_params(self, mats) -> int:
        r = self.sc.lora.rank
        layers = self.arch.total_layers * self.stage_frac
        return int(sum(r * (i + o) for i, o in mats) * layers / self.L.tensor)

    def _adapter_dtype(self) -> int:
        # torchtune (and PEFT before 0.12) create adapters in the model's dtype; fp32 / AMP runs
        # keep them fp32. PEFT >= 0.12 upcasts adapters to fp32 (autocast_adapter_dtype).
        return 4 if self.p == 4 or self.mixed else 2

    def forward(self) -> Footprint:
        a = self.arch
        w = self.resident_weight_bytes()
        T = self.tokens()
        layer = inference_coeff(a, self.p) * T * a.hidden / self.L.tensor
        scores = 0
        if (self.sc.attention or "sdpa") == "eager":
            scores = score_bytes_inference(a.model_type, self.p, self.mixed) * self.b * \
                a.heads * self.s ** 2 / self.L.tensor
        hidden = 2 * self.p * T * a.hidden
        logits = self.logits_peak(T, False)
        act = int(hidden + max(layer, scores, logits))
        comps = {"weights": w, "activations": act}
        self.notes.append("forward: no_grad pass; one block's tensors live at a time")
        moved = traffic.moved_weight_bytes(self, self.b * self.s)
        bw = self._offload_bw({
            "bytes_per_step": int(moved + 2 * act), "tokens_per_step": self.b * self.s,
            "flops_per_step": traffic.inference_flops(self, self.b * self.s, self.s),
            "compute_dtype": compute_dtype(self.prec, self.opts)}, moved)
        self._moe_note(self.b * self.s)
        return self._fp(comps, "forward", {"forward": dict(comps)}, int(max(scores / max(1, a.layers), logits, layer)), bw)

    def generate(self) -> Footprint:
        a, b, s = self.arch, self.b, self.s
        n = int(self.sc.new_tokens or 0)
        w = self.resident_weight_bytes()
        kv_b = 4 if self.p == 4 else 2
        kvpt = a.kv_bytes_per_token(kv_b, mla_latent=False) // self.L.tensor
        legacy_cache = ((self.sc.attention or "sdpa") == "eager"
                        and "dynamic-cache" not in self.opts and "static-cache" not in self.opts)
        legacy_cache = legacy_cache or "legacy-cache" in self.opts
        kv_prompt = b * s * kvpt
        T = b * s
        layer = inference_coeff(a, self.p) * T * a.hidden / self.L.tensor
        scores = 0
        if (self.sc.attention or "sdpa") == "eager":
            scores = score_bytes_inference(a.model_type, self.p, self.mixed) * b * a.heads * s * s
        logit_tokens = T if legacy_cache else b
        logits = self.logits_peak(logit_tokens, False)
        prefill_act = int(2 * self.p * T * a.hidden + max(layer, scores, logits))
        prefill = {"weights": w, "kv_cache": kv_prompt, "activations": prefill_act}
        phases = {"prefill": prefill}
        if "static-cache" in self.opts:
            prefill["kv_cache"] = b * (s + n) * kvpt
        if n > 1:
            kv_final = b * (s + n - 1) * kvpt
            if "static-cache" in self.opts:
                kv_final, tmp = b * (s + n) * kvpt, 0
            elif legacy_cache:   # tuple cache: the caller holds the old tuple while every layer
                tmp = kv_final - b * kvpt   # torch.cat's a new one -> two caches at the end
            else:                # DynamicCache: one layer's old and new tensors at once
                tmp = kv_final // max(1, a.layers)
            dec_logits = self.logits_peak(b, False)
            phases["decode"] = {"weights": w, "kv_cache": kv_final, "temporary": tmp,
                                "activations": int(dec_logits + 4 * self.p * b * a.hidden)}
        self.notes.append(
            "generate: HF generate. attention 'eager' is read as the pre-4.36 transformers stack: "
            "tuple KV cache grown by torch.cat (old and new cache both alive at the end of a "
            "step) and logits for every prompt position; sdpa/flash: DynamicCache (one layer's "
            "copy) and last-position logits (options dynamic-cache / static-cache / "
            "legacy-cache override)")
        peak = max(phases, key=lambda k: sum(phases[k].values()))
        bw = self._generate_bw(kvpt, prefill_act, n)
        comps = dict(phases[peak])
        return self._fp(comps, peak, phases, int(max(logits, kv_final // max(1, a.layers) if n > 1 else 0)), bw)

    def _generate_bw(self, kvpt: int, prefill_act: int, n: int) -> dict:
        """One decode step of the batch (b sequences, one new token each, at the average
        context s + n/2); with no new tokens the step is the prefill."""
        b, s = self.b, self.s
        dt = compute_dtype(self.prec, self.opts)
        if n < 1:
            w = traffic.moved_weight_bytes(self, b * s)
            step = w + b * s * kvpt + 2 * prefill_act
            self._moe_note(b * s)
            return self._offload_bw({
                "bytes_per_step": int(step), "tokens_per_step": b * s,
                "flops_per_step": traffic.inference_flops(self, b * s, s),
                "compute_dtype": dt}, w)
        ctx = s + n // 2
        w = traffic.moved_weight_bytes(self, b)
        kv = kvpt * b * ctx
        self.notes.append(f"generate bandwidth: one decode step of the batch ({b} sequences, one "
                          f"token each) at the average context {ctx:,} tokens (prompt + half "
                          "the new tokens): weights read once per step plus every sequence's "
                          "KV; per-token figures are the step's over its batch")
        self._moe_note(b)
        return self._offload_bw({
            "bytes_per_step": int(w + kv), "tokens_per_step": b,
            "bytes_per_token": (w + kv) / b, "weight_bytes_per_step": int(w),
            "kv_bytes_per_step": int(kv),
            "flops_per_step": traffic.inference_flops(self, b, ctx), "compute_dtype": dt,
            "prefill_flops": traffic.inference_flops(self, b * s, s)}, w)

    def _moe_note(self, tokens: int) -> None:
        a = self.arch
        if not a.is_moe:
            return
        t = traffic.experts_touched(a.num_experts, a.experts_per_token, tokens)
        self.notes.append(f"MoE bandwidth: {tokens:,} tokens per step reach {t:.2f} of "
                          f"{a.num_experts} experts per layer (uniform routing assumed: "
                          f"E x (1 - (1 - k/E)^tokens), k = {a.experts_per_token}); only those "
                          "experts' weights are read")

    def serve(self) -> Footprint:
        a, sv = self.arch, self.sc.serving
        util = sv.gpu_memory_utilization if sv else 0.9
        mml = sv.max_model_len if sv else self.s
        nbt = sv.max_num_batched_tokens if sv else max(2048, mml)
        seqs = sv.max_num_seqs if sv else self.b
        w = self.base_weight_bytes()
        # profile run: one forward of max_num_batched_tokens tokens (no KV yet) + the sampler's
        # fp32 logits, probabilities and log-probabilities for max_num_seqs sequences
        layer = (inference_coeff(a, self.p) + 2 * self.p) * nbt * a.hidden / self.L.tensor
        sampler = 3 * 4 * seqs * a.vocab
        act = int(layer + sampler)
        non_torch = runtime.cuda_context_bytes(self.dev, self.sc) + runtime.nccl_bytes(self.L, self.dev)
        total = self.dev.usable_bytes if self.dev is not None else 80 * 2**30
        kv = max(0, int(util * total) - w - act - non_torch)
        kv_dtype = (sv.kv_cache_dtype if sv else "auto")
        kv_b = 1 if kv_dtype.startswith("fp8") else 2
        kvpt = max(1, a.kv_bytes_per_token(kv_b) // self.L.tensor)
        self.notes.append(
            f"serve: vLLM-style engine; KV pool = {util:.2f} x GPU memory - weights - profiled "
            f"activation peak - non-torch memory = {kv / 2**30:.2f} GiB")
        extra = {"cuda_graphs": 512 * MiB} if (sv is None or sv.cuda_graphs) else {}
        comps = {"weights": w, "kv_cache": kv, "activations": act}
        # vLLM's "maximum concurrency": requests of the stated length the pool holds, capped
        # by the scheduler's max_num_seqs; the decode step runs min(batch_size, that)
        cap, bw, note = traffic.serve_step(self, kv, kvpt, seqs, mml)
        self.notes.append(note)
        if bw.get("tokens_per_step"):
            bw["compute_dtype"] = compute_dtype(self.prec, self.opts)
            self._moe_note(bw["tokens_per_step"])
        fp = self._fp(comps, "serve", {"serve": dict(comps)}, kv // max(1, a.layers), bw)
        fp.extra_device_bytes.update(extra)
        fp.batch_capacity = cap
        return fp

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
        pp = self.L.pipeline
        if pp <= 1:
            return self.train_stage()
        base, ranks = list(self.notes), {}
        for i in sharding.stages(pp):
            self.set_stage(i)
            self.notes = list(base)
            ranks[sharding.stage_name(i, pp)] = self.train_stage()
        worst = max(ranks, key=lambda k: ranks[k].peak_allocated_bytes)
        fp = ranks[worst]
        fp.notes.append(
            f"pipeline {pp} (1F1B): each stage holds {par.stage_layers(self.arch.total_layers, pp)}"
            " blocks and min(pp - i, micro-batches) micro-batches in flight; stage 0 the "
            "embedding, the last stage the head, logits and loss; per_gpu is the worst stage, "
            f"{worst} (every stage: the ranks section)")
        fp.ranks = ranks
        return fp

    def train_stage(self) -> Footprint:
        sc, a, L = self.sc, self.arch, self.L
        task = sc.task
        optim = sc.optimizer or "adamw"
        ga = int(sc.gradient_accumulation or 1)
        lora = task in ("lora", "qlora")
        group = L.shard_group
        div = par.shard_divisors(L.zero, group)
        opt_off = "optimizer" in self.off
        par_off = "params" in self.off

        pb = prec_mod.param_bytes(self.prec)
        if lora:
            fmt = "nf4" if task == "qlora" and not prec_mod.is_quantized(self.prec) else self.prec
            base = self.base_weight_bytes(fmt)
            keep, mats = lora_modules(a, sc.lora.targets if sc.lora else ("q_proj", "v_proj"))
            n_train = self._adapter_params(mats)
            tb = self._adapter_dtype()
            weights = par.shard(base, div["weights"]) + n_train * tb
            largest = max(i * o for i, o in mats) if mats else 0
            self.notes.append("LoRA: frozen base in its precision; adapters, their gradients and "
                              f"optimizer states in {tb * 8}-bit (torchtune / PEFT<0.12 "
                              "convention); frozen linears keep no input for backward unless "
                              "adapted")
        else:
            keep = None
            n_train = self.params_g
            tb = pb
            weights = par.shard(pb * n_train, div["weights"])
            largest = self.largest_param
        grads_full = par.shard(tb * n_train, div["gradients"])
        states = par.shard(opt_mod.state_bytes(optim, n_train, tb, self._matrices(lora)),
                           div["optimizer_states"])
        paged = optim == "paged-adamw-8bit"
        if opt_off:
            states = 0
        if par_off and L.zero < 3:
            raise ScenarioError(
                "offload", f"'params' needs sharded parameters: set parallel.zero to 3 (FSDP "
                f"FULL_SHARD with CPUOffload(offload_params=True), or DeepSpeed ZeRO-3 with "
                f"offload_param / ZeRO-Infinity; one GPU works too: gpus 1, zero 3). With zero "
                f"{L.zero}, PyTorch DDP / DeepSpeed ZeRO-{L.zero} keep every parameter on the GPU")
        if par_off:   # FSDP CPUOffload(offload_params=True): gradients and the step on the CPU
            weights = states = grads_full = 0
        impl = "loop" if self.legacy else "foreach"
        if "fused-optimizer" in self.opts:
            impl = "fused"
        in_bwd = "optimizer-in-backward" in self.opts
        step_tmp = 0 if (opt_off or par_off) else par.shard(
            opt_mod.step_temporary_bytes(optim, n_train, tb, largest, impl),
            div["optimizer_states"] if impl == "foreach" else 1)

        # activations -------------------------------------------------------------------------
        k = self.kernels(True)
        T = self.tokens()
        sbh = T * a.hidden
        c, sc_coef = layer_coeffs(a, k, keep)
        tp = L.tensor
        sp = tp > 1 and "sequence-parallel" in self.opts
        c, sc_coef = sharding.tp_layer(c, sc_coef, sharding.replicated_coeff(a, k, keep), tp, sp)
        seq_div = tp if sp else 1     # block-boundary tensors: split along s with SP
        scores = sc_coef * self.b * a.heads * (self.s ** 2) / max(1, L.context)
        layer_full = c * sbh + scores
        nl = par.stage_layers(a.total_layers, L.pipeline)
        inflight = par.pipeline_inflight(L.pipeline, ga, self.stage)
        nl_live = nl * inflight
        r = 4 if (self.mixed and not self.fsdp_mp) or self.p == 4 else self.p
        ckpt = sc.checkpointing or "none"
        if ckpt == "full":
            kept = 0 if "activations" in self.off else nl_live * r * sbh / seq_div
            acts = kept + layer_full
        elif ckpt == "selective":
            acts = nl_live * selective_coeff(a, k) * sbh
        else:
            acts = nl_live * layer_full
        # embedding output (stage 0), final norm input and the (all-gathered) head input (last)
        acts += ((r if self.first else 0) + (r if self.last else 0)) * sbh / seq_div
        acts += (self.p * sbh if self.last else 0)
        if a.kind == "encoder-decoder":
            self.notes.append("encoder-decoder: decoder blocks counted like encoder blocks at "
                              "seq_len (cross-attention approximated)")
        # one block's backward: gradients of its widest tensors
        ffw = (a.moe_ffn * max(1, a.experts_per_token) if a.is_moe else a.ffn) / a.hidden
        bwd_tmp = (2 * self.p * ffw + 2 * self.p) * sbh / tp + (
            2 * self.p * self.b * a.heads * self.s ** 2 / tp if k.attention == "eager" else 0)
        if sp:   # the all-gathered full-sequence input of a column-parallel linear
            bwd_tmp += self.p * sbh
        bwd_tmp += sharding.ring_buffers(a, self.p, T, tp, L.context)
        logits = self.logits_peak(T, True) if self.last else 0

        # autocast keeps 16-bit copies of the linear weights (cached during forward, saved by
        # each linear for its backward); FSDP mixed precision: all-gathered 16-bit units instead
        cast_cache = 0
        if self.mixed and not self.fsdp_mp:
            cast_cache = 2 * (self.blocks_g if not lora else 0)
        fsdp_ws = 0
        if L.zero >= 3 and (group > 1 or par_off):
            cb = 2 if (self.mixed or self.p == 2) else 4
            fsdp_ws = par.fsdp_unsharded_bytes(self.layer_params, cb, 0 if lora else pb)
            fsdp_ws += self.embed_g * cb // max(1, 1)  # head / embedding gathered for logits
        persist = ga > 1 or self.legacy
        grads_at_bwd = grads_full if persist else 0
        if in_bwd:
            grads_at_bwd = 0
        held_grad = 0
        if in_bwd:
            # a tied embedding's gradient accumulates from the head and the input embedding, so
            # it is held through the whole backward before its update can run
            held_grad = tb * (self.embed_g if a.tied_embeddings and not lora else largest)
        ckpt_cache = cast_cache if ckpt != "full" else 0
        fwd_end = {"weights": weights, "gradients": grads_at_bwd + held_grad,
                   "optimizer_states": states, "activations": int(acts),
                   "temporary": cast_cache + fsdp_ws}
        bwd = {"weights": weights, "gradients": grads_at_bwd + held_grad,
               "optimizer_states": states,
               "activations": int(acts + max(logits, bwd_tmp)),
               "temporary": ckpt_cache + fsdp_ws}
        phases = {"forward": fwd_end, "backward": bwd}
        if not in_bwd and optim != "none":
            phases["optimizer-step"] = {"weights": weights, "gradients": grads_full,
                                        "optimizer_states": states, "temporary": step_tmp}
        else:
            phases["backward-end"] = {"weights": weights,
                                      "gradients": grads_full if not in_bwd else held_grad,
                                      "optimizer_states": states,
                                      "temporary": fsdp_ws + (step_tmp if in_bwd else 0)}
        peak = max(phases, key=lambda p: sum(phases[p].values()))
        comps = dict(phases[peak])
        self._train_notes(optim, impl, persist, paged, lora)
        if par_off:
            self.notes.append("offload 'params' with ZeRO-3: FSDP CPUOffload(offload_params="
                              "True) (DeepSpeed ZeRO-Infinity with offload_param and "
                              "offload_optimizer alike): parameters, their gradients and the "
                              "optimizer step live on the CPU; each unit is copied in and "
                              "gathered for its forward and backward, so the GPU holds the unit "
                              "being computed, one prefetched and the unit's unsharded gradients "
                              "before they go to the CPU (temporary)")
        # the largest tensor live at the peak: after backward only parameter-sized ones remain
        big = largest * tb if peak in ("optimizer-step", "backward-end") else \
            max(logits / 3 if logits else 0, layer_full / 8, largest * tb)
        fp = self._fp(comps, peak, phases, int(big))
        if paged and not opt_off:  # bitsandbytes paged states live in CUDA unified memory
            for ph in phases.values():
                ph["optimizer_states"] = 0
            fp.components["optimizer_states"] = 0
            fp.extra_device_bytes["paged_optimizer_states"] = states
        # each forward / backward pass reads the weights it computes with: under ZeRO-3 the
        # all-gathered 16-bit units (the whole stage passes through the working set)
        w_pass = weights
        if L.zero >= 3 and (group > 1 or par_off):
            cb = 2 if (self.mixed or self.p == 2) else 4
            w_pass = self.base_weight_bytes(fmt) if lora else self.params_g * cb
        steps_bytes = (w_pass * (3 if ckpt == "full" else 2) + 2 * grads_full) * ga \
            + 2 * (states + weights + grads_full) + 2 * int(acts) * ga
        fp.bandwidth = {"bytes_per_step": int(steps_bytes), "tokens_per_step": T * ga,
                        "flops_per_step": traffic.train_flops(self, self.b * self.s * ga, lora,
                                                              ckpt),
                        "compute_dtype": compute_dtype(self.prec, self.opts)}
        if par_off:
            fp.bandwidth["host_link_bytes_per_step"] = int(
                2 * self.params_g * pb / max(1, group))   # each shard in, forward and backward
        return fp

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

    def _fp(self, comps, peak, phases, largest, bw=None) -> Footprint:
        fp = Footprint(components={k: int(max(0, v)) for k, v in comps.items()}, peak_phase=peak,
                       phases={k: {c: int(max(0, v)) for c, v in ph.items()}
                               for k, ph in phases.items()},
                       largest_allocation=int(largest), bandwidth=bw or {}, notes=self.notes)
        return fp
