"""Transformers (decoder, encoder, encoder-decoder): what a job holds per GPU at its peak.

Phases are computed separately and the peak is the largest phase (not a sum of maxima):
training: forward end, start of backward (the loss backward with the logits buffers), optimizer
step; generate: prefill vs the last decode step; serve: a vLLM-style engine (weights + profiled
activations + the pre-allocated KV pool); forward: one no_grad pass; load: weights resident.
Conventions (PyTorch semantics, say what is assumed) are recorded in Footprint.notes.
"""
from __future__ import annotations

from ... import runtime
from ... import parallel as par
from ... import precision as prec_mod
from ...errors import ScenarioError
from ...units import counted
from ...hardware.capabilities import compute_dtype, plan_warnings
from ...vec import int_or, to_int, vmax
from ...vec import peak as peak_of
from ...scenario.rules import max_positions, vllm_batched_tokens
from ..base import Footprint
from . import (encdec, engine, formats, layer_types, mixer_activations, moe_buffers,
               offload_inference, speculative, traffic)
from .activations import (Kernels, dropout_flags, inference_coeff, score_bytes_inference,
                          softcap_logits_saved, upcasts_softmax)
from . import vision_inputs
from .lora import LORA_GROUPS, lora_modules
from ...catalog import stacks
from .stack_hooks import StackHooks
from .training import Training

__all__ = ["LORA_GROUPS", "footprint", "lora_modules"]

MiB = 2**20


def bd_experts(arch) -> int:
    """Routed-expert parameters of the model (TransformerArch.param_groups 'experts')."""
    return arch.param_groups()["experts"] if arch.is_moe else 0


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
    plan = vision_inputs.apply(ctx, spec)   # a VLM's images per sample (vision_inputs.py)
    run = {"train": ctx.train, "lora": ctx.train, "qlora": ctx.train, "generate": ctx.generate,
           "serve": ctx.serve, "forward": ctx.forward}.get(task, ctx.load)
    return vision_inputs.finish(run(), ctx, plan)


class _Ctx(Training, StackHooks):
    """Shared quantities of one scenario (parameter split, layout, dtypes); the training
    phases are in training.Training."""

    def __init__(self, sc, arch, device, prec):
        self.sc, self.arch, self.dev, self.prec = sc, arch, device, prec
        self.opts = set(sc.options or ())
        self.off = set(sc.offload or ())
        self.L = par.layout_of(sc.parallel)
        self.notes: list[str] = []
        self.b = int_or(sc.batch_size, 1)   # an int64 array in a sweep (vramplan.vec)
        self.s = int(sc.seq_len or 1)
        # encoder-decoder: decoder tokens per sequence (the labels); the encoder reads seq_len
        self.t = int(getattr(sc, "target_len", None) or self.s) \
            if arch.kind == "encoder-decoder" else self.s
        bd = arch.param_breakdown()
        L, tp, pp = arch.total_layers, self.L.tensor, self.L.pipeline
        self.stage_frac = par.stage_layers(L, pp) / L
        blocks = bd["attention"] + bd["mlp"] + bd["router"] + bd["pooler"]
        emb = bd["embeddings"] + bd["position_embeddings"]
        head = bd["lm_head"]
        # expert parallel: a rank holds 1/ep of each MoE layer's routed experts (parallel.py);
        # ep_extra_g, the experts other EP ranks hold, comes back under ZeRO (training.py)
        ep_cut = bd_experts(arch) * (1 - 1 / max(1, self.L.expert))
        self.ep_extra_g = int(ep_cut * self.stage_frac / tp)
        self.blocks_g = int(blocks * self.stage_frac / tp) - self.ep_extra_g
        self.norms_g = int(bd["norms"] * self.stage_frac)
        if pp > 1:  # stage 0 holds the embeddings, the last stage the head (tied: a copy)
            self.embed_g = int(max(emb, head if head else arch.vocab * arch.hidden) / tp)
        else:
            self.embed_g = int((emb + head) / tp)
        self.params_g = self.blocks_g + self.norms_g + self.embed_g
        tied_copy = arch.vocab * arch.hidden if arch.kind != "encoder" else 0
        self._emb, self._head = emb, (head or tied_copy)   # last stage: head, a copy when tied
        self.stage, self.first, self.last = 0, True, True
        self.layer_params = int(blocks / max(1, L) / tp) - int(ep_cut / max(1, L) / tp)
        self.largest_param = int(max(arch.vocab * arch.hidden / tp,
                                     arch.hidden * max(arch.ffn, arch.moe_ffn) / tp))
        self.p = prec_mod.activation_bytes(prec)
        self.mixed = prec_mod.is_mixed(prec)
        self.legacy = _legacy(sc, device)
        self.stack = stacks.of(sc)   # the software stack's mechanisms (stack_hooks.py)

    # ---- helpers -------------------------------------------------------------------------
    def base_weight_bytes(self, fmt: str | None = None) -> int:
        stacked = self.stack_weight_bytes(fmt or self.prec)
        if stacked is not None:
            return stacked
        return formats.weight_bytes(self, fmt or self.prec)   # shipped formats: formats.py

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
        hid, attn = dropout_flags(self.arch, training)   # the config's probabilities
        return Kernels(p=self.p, mixed=self.mixed and not self.fsdp_mp, attention=att,
                       dropout=hid or attn, compile="compile" in self.opts,
                       float8="float8-linears" in self.opts, legacy=self.legacy,
                       dense_moe=moe_buffers.routes_densely(self.arch, self.notes, self.stack))

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
        stacked = self.stack_loss_bytes(tokens, V)
        if stacked is not None:
            return stacked
        if "chunked-loss" in self.opts:
            chunk = 3 * 4 * TV // 8     # one of 8 chunks: log-softmax out, its grad, input grad
            if "compile" in self.opts:  # compiled CE saves the 16-bit chunk logits and the lse;
                # its fused backward writes the 16-bit input gradient of one chunk at a time
                return self.p * TV + 2 * self.p * TV // 8
            return 4 * TV + chunk       # every chunk's fp32 log-softmax output is saved
        # standard CE at the start of backward: log_softmax output, its gradient and the input
        # gradient (three lt-byte buffers); HF models without upcast also return the logits
        held = 0 if upcast else self.p * TV
        if upcast and self.legacy:   # torch < 1.11: log_softmax keeps its fp32 input too
            held = 4 * TV
        return 3 * lt * TV + held + softcap_logits_saved(a, self.p) * TV   # Gemma 2's tanh

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
        # an MoE block's routed token copies where wider (moe_buffers, as in generate's prefill)
        coeff = max(inference_coeff(a, self.p), moe_buffers.prefill_coeff(a, self.p))
        layer = coeff * T * a.hidden / self.L.tensor \
            + self.stack_int8_call_bytes(T)   # LLM.int8 copies (stack_hooks)
        scores = 0
        if (self.sc.attention or "sdpa") == "eager":
            scores = score_bytes_inference(a.model_type, self.p, self.mixed) * self.b * \
                a.heads * self.s ** 2 / self.L.tensor
        hidden = 2 * self.p * T * a.hidden
        logits = self.logits_peak(T, False)
        act = to_int(hidden + vmax(layer, scores, logits))
        largest = vmax(scores / max(1, a.layers), logits, layer)
        if a.kind == "encoder-decoder":   # the decoder and its logits at target_len
            sc_coef = scores / max(1, self.b * a.heads * self.s ** 2 / self.L.tensor)
            act, largest = encdec.forward_acts(self, inference_coeff(a, self.p), sc_coef,
                                               self.logits_peak(self.tokens(self.t), False))
            act = to_int(act)
            self.notes.append("forward (encoder-decoder): the encoder at seq_len, then the "
                              "decoder at target_len beside the encoder output; each decoder "
                              "layer projects its cross-attention k and v from it at seq_len")
        comps = {"weights": w, "activations": act}
        self.notes.append("forward: no_grad pass; one block's tensors live at a time")
        moved = traffic.moved_weight_bytes(self, self.b * self.s)
        bw = self._offload_bw({
            "bytes_per_step": to_int(moved + 2 * act), "tokens_per_step": self.b * self.s,
            "flops_per_step": traffic.inference_flops(self, self.b * self.s, self.s, encdec=True),
            "compute_dtype": compute_dtype(self.prec, self.opts)}, moved)
        self._moe_note(self.b * self.s)
        return self._fp(comps, "forward", {"forward": dict(comps)}, to_int(largest), bw)

    def generate(self) -> Footprint:
        a, b, s = self.arch, self.b, self.s
        n = int(self.sc.new_tokens or 0)
        w = self.resident_weight_bytes()
        kv_b = 4 if self.p == 4 else 2
        cache = layer_types.cache_fn(a, kv_b, self.L.tensor, mla_latent=False)  # per sequence
        legacy_cache = ((self.sc.attention or "sdpa") == "eager"
                        and "dynamic-cache" not in self.opts and "static-cache" not in self.opts)
        legacy_cache = legacy_cache or "legacy-cache" in self.opts
        kv_prompt = b * cache(s)
        T = b * s
        coeff = mixer_activations.prefill_coeff(a, self.p, inference_coeff(a, self.p))
        layer = coeff * T * a.hidden / self.L.tensor + self.stack_int8_call_bytes(T)
        scores = 0
        if (self.sc.attention or "sdpa") == "eager":
            scores = score_bytes_inference(a.model_type, self.p, self.mixed) * b * a.heads * s * s
        logit_tokens = T if legacy_cache else b
        if a.kind == "encoder-decoder":
            # the prompt is the encoder's; the decoder's first step is one token per sequence
            logit_tokens = b
            self.notes.append("generate (encoder-decoder): the prompt runs through the "
                              "encoder; the KV cache is the cross-attention k/v of every "
                              "decoder layer at seq_len (EncoderDecoderCache, computed once) "
                              "plus the self-attention cache growing by one per new token")
        logits = self.logits_peak(logit_tokens, False)
        prefill_act = to_int(2 * self.p * T * a.hidden + vmax(layer, scores, logits))
        prefill = {"weights": w, "kv_cache": kv_prompt, "activations": prefill_act}
        phases = {"prefill": prefill}
        if "static-cache" in self.opts:
            prefill["kv_cache"] = b * cache(s + n)
        if n > 1:
            kv_final = b * cache(s + n - 1)
            if "static-cache" in self.opts:
                kv_final, tmp = b * cache(s + n), 0
            elif legacy_cache:   # tuple cache: the caller holds the old tuple while every layer
                tmp = kv_final - b * (cache(s + n - 1) - cache(s + n - 2))   # torch.cat's a new
                # one -> two caches at the end
            else:                # DynamicCache: one layer's old and new tensors at once
                tmp = layer_types.one_layer_bytes(a, kv_final, b, s + n - 1, kv_b,
                                                  self.L.tensor, False)
            dec_logits = self.logits_peak(b, False)
            phases["decode"] = {"weights": w, "kv_cache": kv_final, "temporary": tmp,
                                "activations": to_int(dec_logits + 4 * self.p * b * a.hidden)}
        self.notes.append(
            "generate: HF generate. attention 'eager' is read as the pre-4.36 transformers stack: "
            "tuple KV cache grown by torch.cat (old and new cache both alive at the end of a "
            "step) and logits for every prompt position; sdpa/flash: DynamicCache (one layer's "
            "copy) and last-position logits (options dynamic-cache / static-cache / "
            "legacy-cache override)")
        bw = self._generate_bw(cache, prefill_act, n)
        prop = speculative.apply_generate(self, phases, cache, kv_b)   # speculative.py
        offload_inference.apply_generate(self, phases, speculative.bandwidth(bw, prop))
        peak, comps = peak_of(phases)   # per element for a sweep's batch axis (vramplan.vec)
        self._layer_notes(kv_b)
        one = layer_types.one_layer_bytes(a, kv_final, b, s + n - 1, kv_b, self.L.tensor,
                                          False) if n > 1 else 0
        return self._fp(comps, peak, phases, to_int(vmax(logits, one)), bw)

    def _layer_notes(self, kv_b: float) -> None:
        """The per-layer cache and the shipped weight format, where they apply."""
        for line in (layer_types.note(self.arch, kv_b), formats.note(self.arch, self.prec)):
            if line:
                self.notes.append(line)

    def _generate_bw(self, cache, prefill_act: int, n: int) -> dict:
        """One decode step of the batch (b sequences, one new token each, at the average
        context s + n/2); with no new tokens the step is the prefill."""
        b, s = self.b, self.s
        dt = compute_dtype(self.prec, self.opts)
        if n < 1:
            w = traffic.moved_weight_bytes(self, b * s)
            step = w + b * cache(s) + 2 * prefill_act
            self._moe_note(b * s)
            return self._offload_bw({
                "bytes_per_step": to_int(step), "tokens_per_step": b * s,
                "flops_per_step": traffic.inference_flops(self, b * s, s),
                "compute_dtype": dt}, w)
        ctx = s + n // 2
        w = traffic.moved_weight_bytes(self, b)
        kv = b * cache(ctx)
        self.notes.append(f"generate bandwidth: one decode step of the batch ({counted(b, 'sequence')}, "
                          f"one token each) at the average context {counted(ctx, 'token')} (prompt + half "
                          "the new tokens): weights read once per step plus every sequence's "
                          "KV; per-token figures are the step's over its batch")
        self._moe_note(b)
        return self._offload_bw({
            "bytes_per_step": to_int(w + kv), "tokens_per_step": b,
            "bytes_per_token": (w + kv) / b, "weight_bytes_per_step": int(w),
            "kv_bytes_per_step": to_int(kv),
            "flops_per_step": traffic.inference_flops(self, b, ctx), "compute_dtype": dt,
            "prefill_flops": traffic.inference_flops(self, b * s, s)}, w)

    def _moe_note(self, tokens: int) -> None:
        a = self.arch
        if not a.is_moe:
            return
        t = traffic.experts_touched(a.num_experts, a.experts_per_token, tokens)
        self.notes.append(f"MoE bandwidth: with {counted(tokens, 'token')} per step, {t:.2f} of "
                          f"{a.num_experts} experts per layer are reached (uniform routing assumed: "
                          f"E x (1 - (1 - k/E)^tokens), k = {a.experts_per_token}); only those "
                          "experts' weights are read")

    def serve(self) -> Footprint:
        a, sv = self.arch, self.sc.serving
        util = sv.gpu_memory_utilization if sv else 0.9
        mml = sv.max_model_len if sv else self.s
        nbt = sv.max_num_batched_tokens if sv else vllm_batched_tokens(mml)
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
        kvpt = max(1, layer_types.growth_per_token(a, kv_b, self.L.tensor))
        seq_bytes = layer_types.cache_fn(a, kv_b, self.L.tensor, engine="vllm", state_b=2)
        prop, act_d, kvpt, seq_bytes = speculative.serve_terms(self, kv_b, seqs, kvpt, seq_bytes)
        if prop is not None:   # the proposer's weights and sampler rows come out of the pool
            w, act, kv = w + prop.weight_bytes, act + act_d, max(0, kv - prop.weight_bytes - act_d)
        self._layer_notes(kv_b)
        self.notes.append(
            f"serve: vLLM-style engine; KV pool = {util:.2f} x GPU memory - weights - profiled "
            f"activation peak - non-torch memory = {kv / 2**30:.2f} GiB")
        extra = {"cuda_graphs": 512 * MiB} if (sv is None or sv.cuda_graphs) else {}
        comps = {"weights": w, "kv_cache": kv, "activations": act}
        # vLLM's "maximum concurrency": requests of the stated length the pool holds, capped
        # by the scheduler's max_num_seqs; the decode step runs min(batch_size, that)
        cap, bw, note = traffic.serve_step(self, kv, kvpt, seqs, mml, seq_bytes)
        speculative.bandwidth(bw, prop)
        self.notes.append(note)
        if bw.get("tokens_per_step"):
            bw["compute_dtype"] = compute_dtype(self.prec, self.opts)
            self._moe_note(bw["tokens_per_step"])
        fp = self._fp(comps, "serve", {"serve": dict(comps)}, kv // max(1, a.layers), bw)
        fp.extra_device_bytes.update(extra)
        fp.batch_capacity = cap
        fp.serving = engine.start_check(kv, kvpt, mml, cap, min(self.s, mml),
                                        max_positions(self.sc.spec), seq_bytes)
        if not fp.serving["engine_starts"]:
            if cap or fp.serving["reason"] == engine.NO_KV_MEMORY:  # else serve_step said so
                self.notes.append("serve: the vLLM engine does not start: " + fp.serving["why"])
            fp.batch_capacity = 0
        return fp

    def _fp(self, comps, peak, phases, largest, bw=None) -> Footprint:
        if bw:   # forward / generate / serve: the roofline note quotes no training MFU
            bw.setdefault("workload_kind", "llm-inference")
        fp = Footprint(components={k: to_int(vmax(0, v)) for k, v in comps.items()},
                       peak_phase=peak,
                       phases={k: {c: to_int(vmax(0, v)) for c, v in ph.items()}
                               for k, ph in phases.items()},
                       largest_allocation=to_int(largest), bandwidth=bw or {}, notes=self.notes)
        return fp
