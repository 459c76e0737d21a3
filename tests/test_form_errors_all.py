"""Issue 19 ("it collects every error instead of stopping at the first"; "bad input always gets
a clear message that names the problem ... nothing the user entered is lost"), found by a walk
of the planner page: every field with a bad value carries its own message at once."""
from __future__ import annotations

from vramplan.scenario import form
from vramplan.ui.state.state import PlanState

LLAMA31 = "meta-llama/Llama-3.1-8B"     # max_position_embeddings 131072 (rope llama3)


def test_a_value_beyond_the_positions_keeps_its_message_beside_a_value_out_of_range():
    # seq_len 1e9 > 131072 positions (a rule between keys) and batch_size -1 < 1 (a value read
    # on its own): the pass named only batch_size until it was mended
    errors = form.check({"model": LLAMA31, "task": "lora", "seq_len": 10**9, "batch_size": -1})
    assert set(errors) == {"seq_len", "batch_size"}
    assert "131,072 positions" in errors["seq_len"]
    assert "-1" in errors["batch_size"]


def test_the_page_shows_both_messages_after_the_second_edit():
    s = PlanState()
    s.set_model(LLAMA31)
    s.set("seq_len", 10**9)
    assert s.error("seq_len")
    s.set("batch_size", -1)
    assert s.error("seq_len") and s.error("batch_size")
    assert s.value("seq_len") == 10**9 and s.value("batch_size") == -1   # as typed
    s.set("batch_size", 4)
    assert s.error("seq_len") and not s.error("batch_size")


def test_a_good_value_is_not_named():
    errors = form.check({"model": LLAMA31, "task": "lora", "seq_len": 4096, "batch_size": -1})
    assert set(errors) == {"batch_size"}


# ---- offload_experts (llama.cpp --n-cpu-moe): a field for MoE models only -------------------

def _offload_fields(model: str) -> list[str]:
    return [f.key for f in form.fields({"model": model, "task": "generate"})
            if f.key.startswith("offload_")]


def test_the_experts_field_shows_for_moe_models_only():
    # Qwen2.5-VL 7B and Gemma 3 are dense (no routed experts: arch.is_moe False); Mixtral
    # 8x7B routes each token to 2 of 8 experts in each of its 32 layers
    assert _offload_fields("Qwen/Qwen2.5-VL-7B-Instruct") == ["offload_layers"]
    assert _offload_fields("google/gemma-3-4b-pt") == ["offload_layers"]
    assert _offload_fields("mistralai/Mixtral-8x7B-v0.1") == ["offload_layers",
                                                              "offload_experts"]


def test_a_switch_to_a_dense_model_drops_the_experts_entry():
    s = PlanState(draft={"model": "mistralai/Mixtral-8x7B-v0.1", "task": "generate",
                         "offload_experts": 4})
    assert s.shown("offload_experts") and s.value("offload_experts") == 4
    s.set_model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert not s.shown("offload_experts") and "offload_experts" not in s.draft
    assert "offload_experts" not in s.errors


# ---- an unknown model id typed: the other fields keep what they showed ----------------------

def test_a_mistyped_model_keeps_the_precision_shown():
    # Llama-3.1-8B LoRA in bf16 (its default, so the link's bf16 is not kept as given: the
    # pass derives it); a typo in the model id left the precision box on its first choice,
    # fp32 (the form has no default without a model), until the id was mended
    s = PlanState()
    s.load_query("model=meta-llama/Llama-3.1-8B&task=lora&precision=bf16")
    assert s.value("precision") == "bf16"
    s.set_model("meta-llama/Llama-3.1-8Bx")
    assert "model" in s.errors and s.stale
    assert s.value("precision") == "bf16"
    assert s.value("batch_size") == 1               # the plan on screen's, as before
    s.set_model("meta-llama/Llama-3.1-8B")
    assert not s.errors and s.value("precision") == "bf16"


def test_a_given_precision_stays_with_a_mistyped_model():
    s = PlanState(draft={"model": "gpt2", "task": "train", "precision": "fp16-mixed"})
    s.set_model("gpt2x")
    assert s.draft["precision"] == "fp16-mixed" and s.value("precision") == "fp16-mixed"


# ---- the positions refusal: counts as the page writes them, the key said once ---------------

def test_the_positions_message_groups_thousands_and_does_not_repeat_the_key():
    # the page labels the message with its key ("seq_len: ..."); it read
    # "seq_len: seq_len = 1000000000 exceeds the 131072 positions ..."
    msg = form.check({"model": LLAMA31, "task": "lora", "seq_len": 10**9})["seq_len"]
    assert msg.startswith("1,000,000,000 tokens exceed the 131,072 positions "
                          f"'{LLAMA31}' has (")
    # generate: the sum is not the key, so it is named: 131072 - 100 + 101 = 131,073
    msg = form.check({"model": LLAMA31, "task": "generate", "seq_len": 131072 - 100,
                      "new_tokens": 101})["seq_len"]
    assert msg.startswith("seq_len + new_tokens = 131,073 exceeds the 131,072 positions")
    msg = form.check({"model": LLAMA31, "task": "serve",
                      "serving": {"max_model_len": 200000}})["serving.max_model_len"]
    assert msg.startswith("200,000 tokens exceed the 131,072 positions")


def test_the_positions_message_reads_in_chinese():
    from vramplan import i18n
    msg = form.check({"model": "gpt2", "task": "train", "seq_len": 2048})["seq_len"]
    assert i18n.translate_message(msg, "zh") == ("2,048 个 token 超过了“gpt2”的 1,024 个位置"
                                                 "（学习得到的位置嵌入）")
