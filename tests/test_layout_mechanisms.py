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
HEAD_SIDE = 2 + 2       # the last stage's final-norm input and head input, 2 B each


def test_full_checkpointing_counts_the_embedding_output_once_as_the_first_block_input():
    # 4 block inputs of 2 B (the first is the embedding output), the recomputed block, the
    # head side: 8 + 42.25 + 4 = 54.25 SBH (was 56.25 with the embedding output again)
    assert forward_activations("full") == int((4 * 2 + BLOCK + HEAD_SIDE) * SBH) == 3_555_328


def test_selective_checkpointing_counts_the_embedding_output_once_too():
    # op SAC per block: input 2, q, v, gate, down mm outputs 2 x (1 + 1 + 2 + 1) = 10, SDPA
    # output 2, logsumexp 0.25: 14.25; 4 blocks + head side = 61 SBH (was 63)
    assert forward_activations("selective") == int((4 * 14.25 + HEAD_SIDE) * SBH) == 3_997_696


def test_without_checkpointing_the_embedding_output_stays_its_own_term():
    # 4 whole blocks + the embedding output 2 + head side: 169 + 2 + 4 = 175 SBH
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
