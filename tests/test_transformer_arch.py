"""TransformerArch: hand-checkable parameter counts, KV-cache bytes and bad configs."""
import pytest

from vramplan.catalog import get_model
from vramplan.catalog.hf_config import arch_from_config
from vramplan.catalog.transformer_arch import generic_decoder
from vramplan.errors import ScenarioError


def arch(name):
    return get_model(name).arch


def test_llama_2_7b_params_by_hand():
    # 32 layers x (4 * 4096^2 attention + 3 * 4096 * 11008 MLP + 2 * 4096 norms)
    # + 2 * 32000 * 4096 (embeddings and untied lm_head) + 4096 final norm
    by_hand = 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096
    assert by_hand == 6_738_415_616
    assert arch("meta-llama/Llama-2-7b-hf").param_count() == by_hand


def test_llama_31_8b_kv_bytes_per_token_bf16_is_128_kib():
    a = arch("meta-llama/Llama-3.1-8B")
    assert (a.kv_heads, a.head_dim, a.layers) == (8, 128, 32)
    assert a.kv_bytes_per_token(2) == 2 * 32 * 8 * 128 * 2 == 131072


def test_gpt3_175b_from_the_paper():
    a = arch("openai/gpt-3-175b")
    # 96 x (12 h^2 + 13 h) + vocab*h + 2048*h + 2h final LN
    h = 12288
    assert a.param_count() == 96 * (12 * h * h + 13 * h) + 50257 * h + 2048 * h + 2 * h
    assert a.param_count() == pytest.approx(174.6e9, rel=1e-3)


def test_mixtral_8x7b_total_and_active():
    a = arch("mistralai/Mixtral-8x7B-v0.1")
    assert a.param_count() == 46_702_792_704          # "46.7B"
    assert a.active_param_count() == pytest.approx(12.9e9, rel=0.01)  # "12.9B active"
    assert a.kv_bytes_per_token(2) == 131072


def test_bert_large_with_pooler():
    a = arch("bert-large-uncased")
    assert a.param_count() == 335_141_888
    b = a.param_breakdown()
    assert b["pooler"] == 1024 * 1024 + 1024
    assert b["embeddings"] == 30522 * 1024 + 2 * 1024            # words + token types
    assert b["position_embeddings"] == 512 * 1024
    assert b["lm_head"] == 0
    assert a.kv_bytes_per_token(2) == 0  # encoders hold no KV cache


def test_opt_learned_positions_have_offset_2():
    a = arch("facebook/opt-350m")
    assert a.param_breakdown()["position_embeddings"] == (2048 + 2) * 1024
    assert a.param_count() == 331_196_416


def test_gpt_bigcode_multi_query_is_one_kv_head():
    a = arch("bigcode/octocoder")
    assert a.kv_heads == 1 and a.head_dim == 128
    assert a.kv_bytes_per_token(2) == 2 * 40 * 1 * 128 * 2


def test_falcon_kv_heads():
    assert arch("tiiuae/falcon-7b").kv_heads == 1             # multi_query
    assert arch("tiiuae/falcon-40b").kv_heads == 8            # new_decoder_architecture
    assert arch("tiiuae/falcon-7b").param_count() == 6_921_720_704


def test_gemma2_explicit_head_dim_wins():
    a = arch("google/gemma-2-9b")
    assert a.hidden // a.heads == 224 and a.head_dim == 256
    assert a.param_count() == 9_241_705_984
    assert a.tied_embeddings


def test_qwen25_qkv_bias():
    assert arch("Qwen/Qwen2.5-7B").param_count() == 7_615_616_512
    assert arch("Qwen/Qwen2.5-0.5B").param_count() == 494_032_768


def test_t5_v1_0_tied_and_t0_untied():
    assert arch("t5-small").param_count() == 60_506_624
    assert arch("t5-small").tied_embeddings
    t0 = arch("bigscience/T0_3B")
    assert not t0.tied_embeddings and t0.gated_mlp
    assert t0.param_count() - t0.base_param_count() == 32128 * 2048


def test_deepseek_v3_mla_and_moe():
    a = arch("deepseek-ai/DeepSeek-V3")
    assert a.param_count() == pytest.approx(671e9, rel=2e-3)
    assert a.active_param_count() == pytest.approx(37.5e9, rel=0.02)
    # latent cache: (512 + 64) per layer per token
    assert a.kv_bytes_per_token(2) == (512 + 64) * 61 * 2
    assert a.kv_bytes_per_token(2, mla_latent=False) == 128 * (128 + 64 + 128) * 61 * 2


def test_bloom_176b():
    assert arch("bigscience/bloom").param_count() == 176_247_271_424


def test_breakdown_sums_to_count():
    a = arch("mistralai/Mixtral-8x22B-v0.1")
    assert sum(a.param_breakdown().values()) == a.param_count()
    assert a.param_breakdown()["router"] == 56 * 8 * 6144


@pytest.mark.parametrize("params", [1.2e8, 5e8, 1e9, 3e9, 7e9, 13e9, 70e9, 175e9, 405e9])
def test_generic_decoder_within_2_percent(params):
    a = generic_decoder(params)
    assert abs(a.param_count() - params) <= 0.02 * params
    assert a.hidden % a.heads == 0 and a.gated_mlp and a.kind == "decoder"


def test_inline_config_without_model_type_is_llama_like():
    a = arch_from_config({"hidden_size": 4096, "num_hidden_layers": 32,
                          "num_attention_heads": 32, "intermediate_size": 11008,
                          "vocab_size": 32000})
    assert a.param_count() == 6_738_415_616


@pytest.mark.parametrize("config, key", [
    ({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 8, "vocab_size": 10}, "hidden_size"),
    ({"model_type": "llama", "hidden_size": "4096", "num_hidden_layers": 2,
      "num_attention_heads": 2, "intermediate_size": 8, "vocab_size": 10}, "hidden_size"),
    ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 0,
      "num_attention_heads": 2, "intermediate_size": 8, "vocab_size": 10}, "num_hidden_layers"),
    ({"model_type": "gpt2", "n_embd": 64, "n_layer": True, "n_head": 2, "vocab_size": 10},
     "n_layer"),
    ({"model_type": "t5", "d_model": 64, "num_heads": 2, "d_ff": 8, "vocab_size": 10},
     "num_layers"),
    ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 3, "intermediate_size": 8, "vocab_size": 10}, "num_attention_heads"),
    ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 8, "vocab_size": 10, "tie_word_embeddings": "yes"},
     "tie_word_embeddings"),
])
def test_bad_config_names_the_key(config, key):
    with pytest.raises(ScenarioError) as e:
        arch_from_config(config)
    assert e.value.key == "architecture"
    assert key in str(e.value)


@pytest.mark.parametrize("params", [0, -1, "7e9", True, 1e15])
def test_generic_decoder_rejects_bad_params(params):
    with pytest.raises(ScenarioError, match="params"):
        generic_decoder(params)
