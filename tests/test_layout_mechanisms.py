"""Layout mechanisms of the training estimate, by hand (issue 20.1, layouts right in every
checkpointing mode). The toy decoder of tests/test_trace_parallel.py: hidden 128, 8 heads,
4 blocks, ffn 256, vocab 512, batch 4 x seq 128, pure bf16, SDPA; SBH = 65,536 elements.

Under full or selective checkpointing the first block's checkpoint holds its input, and on the
first stage that input is the embedding's output: one tensor, counted once among the block
inputs (torch/utils/checkpoint.py non-reentrant checkpoint keeps the inputs it replays the
block from; torchtitan checkpoints each block, torchtitan/distributed/activation_checkpoint.py).
Before, the estimate added the embedding output again beside them (+2 SBH per stage 0: PP4
stage 0 under full checkpointing was +6.3 % against the trace, now +4.0 %)."""
from vramplan.estimate import estimate

ARCH = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 256,
        "vocab_size": 512}
SBH = 4 * 128 * 128


def forward_activations(checkpointing: str, arch=ARCH) -> int:
    d = {"architecture": arch, "task": "train", "batch_size": 4, "seq_len": 128,
         "precision": "bf16", "optimizer": "adamw", "attention": "sdpa",
         "gpu": "nvidia-a100-sxm4-80gb", "checkpointing": checkpointing}
    return estimate(d).to_dict()["phases"]["forward"]["activations"]


# one block's saved tensors with SDPA in bf16 (docs/tracing.md, tests/test_trace_parallel.py):
# two fp32 norm copies 8, two cast-back norm outputs 4, two linear inputs 4, rotary q, k and v
# 6, the kernel output 2 and the transposed copy 2, the fp32 logsumexp 4 x 8 heads / 128 =
# 0.25, gate and up outputs, silu and the product 4 x 2 x 2 = 16: 42.25 x SBH
BLOCK = 42.25
# the last stage's final norm saves its fp32 copy and the cast-back normed tensor (HF RMSNorm,
# 4 + 2, sharding.norm_saved; was counted as its 2 B input) and the head input 2: 8
HEAD_SIDE = 4 + 2 + 2


def test_full_checkpointing_counts_the_embedding_output_once_as_the_first_block_input():
    # 4 block inputs of 2 B (the first is the embedding output), the recomputed block, the
    # head side: 8 + 42.25 + 8 = 58.25 SBH (was 56.25: + 2 embedding output again, - 4 of
    # the final norm)
    assert forward_activations("full") == int((4 * 2 + BLOCK + HEAD_SIDE) * SBH) == 3_817_472


def test_selective_checkpointing_counts_the_embedding_output_once_too():
    # op SAC per block: input 2, q, v, gate, down mm outputs 2 x (1 + 1 + 2 + 1) = 10, SDPA
    # output 2, logsumexp 0.25: 14.25; 4 blocks + head side = 65 SBH (was 63)
    assert forward_activations("selective") == int((4 * 14.25 + HEAD_SIDE) * SBH) == 4_259_840


def test_without_checkpointing_the_embedding_output_stays_its_own_term():
    # 4 whole blocks + the embedding output 2 + head side: 169 + 2 + 8 = 179 SBH
    assert forward_activations("none") == int((4 * BLOCK + 2 + HEAD_SIDE) * SBH)


def test_an_embedding_norm_keeps_the_embedding_output_under_checkpointing():
    """BERT / BLOOM-style embedding LayerNorm saves the embedding output as its input before
    the first block's input exists: two tensors, both counted."""
    from vramplan.workloads.transformer.stage_activations import StageActivations
    ctx = type("Ctx", (), {"arch": type("A", (), {"extra": {"embedding_norm": True}})()})()
    assert StageActivations._embed_is_block_input(ctx, "full") is False
    ctx.arch.extra = {}
    assert StageActivations._embed_is_block_input(ctx, "full") is True
    assert StageActivations._embed_is_block_input(ctx, "selective") is True
    assert StageActivations._embed_is_block_input(ctx, "none") is False


def _toy_arch():
    from vramplan.catalog import spec_from_architecture
    return spec_from_architecture(ARCH).arch


BF16 = dict(p=2, mixed=False, attention="sdpa", dropout=False, compile=False)


def test_the_final_norm_saves_what_a_block_norm_saves():
    """HF RMSNorm saves x.float() (4 B) and the cast-back normed tensor (2 B in pure bf16, 4 B
    under AMP where it stays fp32); a compiled (fused) norm its input only."""
    from vramplan.workloads.transformer.activations import Kernels
    from vramplan.workloads.transformer.sharding import norm_saved
    a = _toy_arch()
    assert norm_saved(a, Kernels(**BF16)) == 4 + 2
    assert norm_saved(a, Kernels(**dict(BF16, mixed=True))) == 4 + 4
    assert norm_saved(a, Kernels(**dict(BF16, compile=True))) == 2


def test_the_second_norms_backward_decides_under_tp_without_sp_by_hand():
    """In the second norm's backward the MLP half's saved tensors are gone (gate, up, silu,
    product: 4 x 2 B x ffn 2 = 16 over t; the norm output and its cast-back, 2 + 2 whole
    without SP) and the norm holds five fp32 block-width temporaries (20) and the residual
    gradient (2): whole without SP, over t with it."""
    from vramplan.workloads.transformer.activations import Kernels
    from vramplan.workloads.transformer.sharding import norm_backward_extra
    a, k = _toy_arch(), Kernels(**BF16)
    assert norm_backward_extra(a, k, 4, False) == (20 + 2) - (16 / 4 + 2 + 2) == 14
    assert norm_backward_extra(a, k, 4, True) == (20 + 2) / 4 - (16 / 4 + 4 / 4) == 0.5
    # one GPU: 22 - 20 = 2, below the MLP region's 12 (two ffn-wide gradients 2 x 2 x 2, two
    # block-wide 2 x 2): the MLP decides, as before
    assert norm_backward_extra(a, k, 1, False) == 2
    assert norm_backward_extra(a, Kernels(**dict(BF16, compile=True)), 4, False) == 0
