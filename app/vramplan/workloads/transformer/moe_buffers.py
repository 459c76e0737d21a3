"""The buffers transformers 5.23's MoE experts hold at their widest in a no_grad forward (a
generate prefill, a forward task): the routed token copies, not the weights; and in training what Llama 4's
dense routing keeps for backward beyond the k routed experts activations.layer_coeffs counts
(`dense_routing_saved`).

transformers' MoE blocks take one of two paths (the pinned release, `pyproject.toml`'s tracing
extra):

* grouped experts (every class under `@use_experts_implementation`: Qwen2/3-MoE, Mixtral,
  OLMoE, DeepSeek-V2/V3, GLM-4.5, gpt-oss, Granite MoE, Nemotron-H, ...): `PreTrainedModel.
  get_correct_experts_implementation` picks "grouped_mm" by default, and
  `integrations/moe.py: grouped_mm_experts_forward` runs on S = tokens x top_k selections.
  Its locals live until it returns: `selected_hidden_states_g = hidden_states[perm // k]`
  (S x h), the up projection `proj_out` (S x 2I, or S x I without a gate), the gate's
  outputs, the down projection (S x h), `weighted_out` (S x h) and its reordered copy
  `weighted_out[inv_perm]` (S x h) while the old one is still bound; with biases
  (`has_bias`, gpt-oss) `gate_up_proj_bias[expert_ids_g]` (S x 2I) and then
  `down_proj_bias[expert_ids_g]` (S x h) are gathered per selection. The default gate
  (`_default_apply_gate`: act(gate) * up) adds two S x I tensors; gpt-oss's
  (`GptOssExperts._apply_gate`: clamp(gate), clamp(up), gate * sigmoid(gate * alpha),
  (up + 1) * glu) holds five at its last product. The int64 sort ids, permutation and its
  inverse, the histc input (4 B) and the sorted routing weights add ~28 B per selection;
  the router's logits (tokens x E, kept by the block: `_, weights, ids = self.gate(...)`) and
  its top-k weights and int64 indices stay alive through the block.
* Llama 4 (`models/llama4/modeling_llama4.py`, `Llama4TextMoe.forward`): no grouped path;
  every token goes through every expert. `hidden_states.repeat(E, 1) * router_scores`
  (E tokens x h), then `Llama4TextExperts.forward`: one bmm to gate_up (E tokens x 2I),
  act(gate) and `up * act(gate)` (E tokens x I each), a bmm down (E tokens x h). The router
  keeps its logits and the scattered scores (tokens x E each), and
  `Llama4TextDecoderLayer.forward` keeps `attention_states` (tokens x h) bound through the MLP.

Every buffer is proportional to the tokens, so `prefill_coeff` gives the widest of those moments
in activations.inference_coeff's unit (bytes per token per hidden unit, with its + 2p for the
block's input and residual; the generate prefill and the forward task add 2 p T h more,
footprint.generate / forward): the
tracer meets it on Qwen3-30B-A3B, gpt-oss-20b and Llama 4 Scout (tests/test_moe_buffers.py,
benchmarks/results/real-modules-2026-12-02b.md). Tensor parallelism divides the coefficient as
it divides the dense block's (footprint.generate).
"""
from __future__ import annotations

from .. import stack_mechanisms

DENSE_ROUTING = {"llama4_text", "llama4"}   # Llama4TextMoe: every token through every expert
BIASED = {"gpt_oss"}          # @use_experts_implementation(..., has_bias=True)
CLAMPED_SWIGLU = {"gpt_oss"}  # GptOssExperts._apply_gate: five S x I tensors at its end
UNGATED = {"nemotron_h"}      # @use_experts_implementation(has_gate=False): act(up_proj)

# bytes per selection of the sort / permutation bookkeeping in grouped_mm_experts_forward:
# expert_ids_g and perm (torch.sort, int64), inv_perm (int64), the histc input (CUDA `.int()`)
_SORT_BYTES = 8 + 8 + 8 + 4


def dense_routing(arch) -> bool:
    """Whether transformers runs every token through every expert (Llama 4)."""
    return arch.is_moe and arch.model_type in DENSE_ROUTING


def routes_densely(arch, notes: list, stack) -> bool:
    """Whether this plan runs transformers' dense routing: a Llama 4 MoE on a stack without
    its own top-k MoE (stack mechanism topk-moe-routing: torchtitan, torchtune, Megatron; the
    note is added when it applies). False for every other model (nothing to route densely)."""
    if not dense_routing(arch):
        return False
    return not stack_mechanisms.use(notes, stack, "topk-moe-routing")


def _grouped(arch, p: int) -> float:
    """Bytes per token at the widest moment of grouped_mm_experts_forward (module docstring)."""
    h, k, E, inner = arch.hidden, max(1, arch.experts_per_token), arch.num_experts, arch.moe_ffn
    biased = arch.model_type in BIASED
    if arch.model_type in UNGATED:
        gate = h + inner + inner + (inner if biased else 0)
    elif arch.model_type in CLAMPED_SWIGLU:
        gate = h + 2 * inner + 5 * inner + (2 * inner if biased else 0)
    else:
        gate = h + 2 * inner + 2 * inner + (2 * inner if biased else 0)
    down = 2 * h + inner + (h if biased else 0)
    reorder = 4 * h + (h if biased else 0)
    router = E * p + k * (8 + p)               # logits, top-k int64 ids and weights
    return router + k * (_SORT_BYTES + p) + k * p * max(gate, down, reorder)


def _dense(arch, p: int) -> float:
    """Bytes per token at the widest moment of Llama4TextMoe.forward (module docstring)."""
    h, E, inner = arch.hidden, arch.num_experts, arch.moe_ffn
    gate = h + 2 * inner + 2 * inner         # routed_in, gate_up, act(gate), up * act(gate)
    down = 2 * h + 3 * inner                 # routed_in, gate_up, the product, the bmm out
    routed = 2 * h                           # the repeat and its scaled copy
    router = 2 * E * p                       # logits and the scattered scores
    return router + h * p + E * p * max(gate, down, routed)   # + attention_states


def dense_routing_saved(arch, p: int, compile_: bool, keep_down: bool, dense: bool = True
                        ) -> float:
    """Training with Llama 4's dense routing: bytes per token per hidden unit, averaged over the
    layers, that the E - k experts beyond the k routed ones activations.layer_coeffs counts
    keep for backward. Each expert sees every token (Llama4TextMoe.forward): the repeat
    (saved by the multiply with the router scores, which are trained) and routed_in (the bmm's
    input), 2 x h; gate_up (2I: chunk views that silu and the product keep), act(gate) (I),
    the product (I, the down bmm's input) - the same 4I + 2h per expert that layer_coeffs
    counts for a routed one (its gate, act, up, product and the dispatch / combine copies).
    `dense` False: the stack runs its own top-k MoE (stack mechanism topk-moe-routing:
    torchtitan, torchtune, Megatron), 0."""
    if not dense or not dense_routing(arch) or arch.moe_layers == 0:
        return 0.0
    h, inner = arch.hidden, arch.moe_ffn
    per_expert = p * (3 if compile_ else 4) * inner / h - (0 if keep_down else p * inner / h)
    per_expert += 2 * p
    share = arch.moe_layers / max(1, arch.layers)
    return (arch.num_experts - max(1, arch.experts_per_token)) * per_expert * share


def clamped_swiglu_saved(arch, p: int, compile_: bool) -> float:
    """Training: what gpt-oss's gate keeps beyond the default gated MLP's act(gate), up and
    product (activations.layer_coeffs), bytes per token per hidden unit. GptOssExperts.
    _apply_gate: `gate.clamp(max=limit)` and `up.clamp(...)` save their inputs, strided views of
    gate_up's output (its whole 2I storage, which silu would keep too); `gate * sigmoid(gate *
    alpha)` keeps the clamped gate and sigmoid's output; `(up + 1) * glu` keeps up + 1 and glu;
    the down projection keeps the product: 2I + 4I + I = 7I per routed copy against the
    default's 2I + I + I = 4I, so 3I more for each of the k routed copies. 0 when compiled
    (inductor fuses the chain) and for every other model."""
    if arch.model_type not in CLAMPED_SWIGLU or not arch.is_moe or compile_:
        return 0.0
    share = arch.moe_layers / max(1, arch.layers)
    return max(1, arch.experts_per_token) * 3 * p * arch.moe_ffn / arch.hidden * share


def prefill_coeff(arch, p: int) -> float:
    """One MoE block's widest no_grad moment in bytes per token per hidden unit, with the
    block's input and residual (+ 2p, as activations.inference_coeff); 0 for a dense model."""
    if not arch.is_moe or arch.moe_layers == 0:
        return 0.0
    per_token = _dense(arch, p) if dense_routing(arch) else _grouped(arch, p)
    return per_token / arch.hidden + 2 * p
