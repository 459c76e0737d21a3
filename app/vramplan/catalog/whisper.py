"""Whisper (`WhisperForConditionalGeneration`) as an encoder-decoder `TransformerArch`.

What transformers builds (models/whisper/modeling_whisper.py; the module printout of
openai/whisper-large-v3 quoted in the catalog entry's source):

* `WhisperEncoder`: conv1 = Conv1d(num_mel_bins, d_model, k=3, stride 1) and conv2 =
  Conv1d(d_model, d_model, k=3, stride 2), both with bias; `embed_positions` an
  Embedding(max_source_positions, d_model) (sinusoidal, frozen, still a parameter); per layer
  q / v / out_proj with bias and k_proj without, fc1 / fc2 with bias, two LayerNorms; a final
  LayerNorm.
* `WhisperDecoder`: embed_tokens (vocab x d_model), `embed_positions` (max_target_positions x
  d_model, learned); per layer self-attention and cross-attention (`encoder_attn`), each q / v /
  out with bias and k without, fc1 / fc2 with bias, three LayerNorms; a final LayerNorm.
* `proj_out` (d_model -> vocab, no bias) tied to embed_tokens (WhisperConfig default
  tie_word_embeddings True).

The encoder always reads a 30-second window: `WhisperFeatureExtractor` pads / cuts audio to
n_samples 480000 at 16 kHz = nb_max_frames 3000 mel frames, conv2's stride 2 makes them
max_source_positions 1500 encoder positions, and `WhisperEncoder.forward` refuses any other
length (expected_seq_length = max_source_positions * conv1.stride * conv2.stride). So a Whisper
plan's encoder `seq_len` is 1500 (`ENCODER_POSITIONS`); the decoder's tokens (`target_len`,
`new_tokens`) are bounded by max_target_positions (448).
"""
from __future__ import annotations

# WhisperConfig.__init__ defaults (models/whisper/configuration_whisper.py)
DEFAULTS = {"vocab_size": 51865, "num_mel_bins": 80, "encoder_layers": 4,
            "encoder_attention_heads": 6, "decoder_layers": 4, "decoder_attention_heads": 6,
            "decoder_ffn_dim": 1536, "encoder_ffn_dim": 1536, "d_model": 384,
            "max_source_positions": 1500, "max_target_positions": 448}

SAMPLES_PER_WINDOW = 480_000   # WhisperFeatureExtractor n_samples: 30 s at 16 kHz
FRAMES_PER_WINDOW = 3000       # nb_max_frames (hop_length 160)


def whisper_fields(r, mt: str, kind: str, tied: bool, bad) -> dict:
    """The TransformerArch fields of a Whisper config.json read with `r` (hf_config._Reader);
    `bad(msg)` makes the error."""
    def get(key):
        return r.int(key, default=DEFAULTS[key])
    d, heads = get("d_model"), get("encoder_attention_heads")
    if (get("decoder_attention_heads"), get("decoder_ffn_dim")) != (heads, get("encoder_ffn_dim")):
        raise bad("vramplan reads Whisper configs whose decoder has the encoder's heads and "
                  "MLP width (encoder_attention_heads = decoder_attention_heads, "
                  "encoder_ffn_dim = decoder_ffn_dim), as every published checkpoint does")
    if d % heads:
        raise bad(f"d_model ({d}) is not a multiple of encoder_attention_heads ({heads})")
    return dict(
        model_type=mt, kind=kind, layers=get("encoder_layers"),
        decoder_layers=get("decoder_layers"), hidden=d, heads=heads, kv_heads=heads,
        head_dim=d // heads, ffn=get("encoder_ffn_dim"), gated_mlp=False,
        vocab=get("vocab_size"), tied_embeddings=tied,
        max_positions=get("max_source_positions"), learned_positions=True,
        norm="layernorm", bias=True,
        extra={"model_type": mt, "whisper": True, "mel_bins": get("num_mel_bins"),
               "target_positions": get("max_target_positions")})


def whisper_breakdown(arch, out: dict[str, int]) -> dict[str, int]:
    """Parameters by part of a Whisper arch (`out` holds embeddings and the encoder's position
    table already)."""
    d, f, x = arch.hidden, arch.ffn, arch.extra
    attn = 4 * d * d + 3 * d                # q, k, v, out; k without bias
    mlp = 2 * d * f + f + d
    ln = 2 * d
    out["position_embeddings"] += x["target_positions"] * d
    out["attention"] = arch.layers * attn + arch.decoder_layers * 2 * attn
    out["mlp"] = ((arch.layers + arch.decoder_layers) * mlp
                  + x["mel_bins"] * d * 3 + d + d * d * 3 + d)    # conv1, conv2 (with bias)
    out["norms"] = arch.layers * 2 * ln + ln + arch.decoder_layers * 3 * ln + ln
    if not arch.tied_embeddings:
        out["lm_head"] = d * arch.vocab
    return out


def encoder_positions(arch) -> int:
    """Encoder positions of one 30-second window (1500 for every published Whisper)."""
    return int(arch.max_positions)
