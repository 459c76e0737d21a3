"""The catalog: data files, lookup rules, and parameter counts against tests/data/models.json."""
import json
from pathlib import Path

import pytest

from vramplan.catalog import (AmbiguousModelError, Catalog, CatalogError, ModelSpec, get_model,
                              list_models, load_catalog, resolve_name, spec_from_architecture)
from vramplan.errors import ScenarioError, UnknownIdError

REF = json.loads((Path(__file__).parent / "data" / "models.json").read_text())
TRANSFORMER_REF = {k: v for k, v in REF.items() if v["family"] not in ("diffusion", "vision")}

REQUIRED = [
    "bert-base-uncased", "bert-base-cased", "bert-large-uncased", "bert-large-cased",
    "roberta-base", "roberta-large", "t5-small", "t5-base", "t5-large", "t5-3b", "t5-11b",
    "bigscience/T0_3B", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "openai-community/gpt2",
    "openai-community/gpt2-xl", *[f"facebook/opt-{s}" for s in
                                  ("125m", "350m", "1.3b", "2.7b", "6.7b", "13b", "30b", "66b")],
    "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-70b-chat-hf",
    "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.2-1B-Instruct",
    "meta-llama/Llama-3.2-3B-Instruct", "mistralai/Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.3",
    "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1",
    *[f"Qwen/Qwen2.5-{s}" for s in ("0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B")],
    "google/gemma-2-2b", "google/gemma-2-9b", "google/gemma-2-27b",
    "microsoft/Phi-3-mini-4k-instruct", "microsoft/Phi-3-medium-4k-instruct", "microsoft/phi-4",
    "bigcode/starcoder", "bigcode/octocoder", "tiiuae/falcon-7b", "tiiuae/falcon-40b",
    "deepseek-ai/DeepSeek-V3", "openai/gpt-3-175b", "bigscience/bloom",
]


def test_at_least_40_transformers_each_with_a_source():
    specs = [s for s in list_models() if s.is_transformer]
    assert len(specs) >= 40
    for s in specs:
        assert s.source.startswith("http"), s.id
        assert s.family in ("decoder", "encoder", "encoder-decoder")
        assert s.arch.kind == s.family


@pytest.mark.parametrize("name", REQUIRED)
def test_required_models_present(name):
    assert get_model(name).is_transformer


@pytest.mark.parametrize("name", sorted(TRANSFORMER_REF))
def test_param_count_matches_reference_models_json(name):
    """Exact: AutoModel (base, no untied lm_head) and the full model. The one difference is
    bert-large-uncased's params_total, which adds the 2-label classifier (1024*2 + 2) the
    fidelity cases trained; our encoders count BertModel with its pooler."""
    ref, a = TRANSFORMER_REF[name], get_model(name).arch
    assert a.base_param_count() == ref["params_automodel"]
    expected_total = ref["params_total"] - (1024 * 2 + 2 if name == "bert-large-uncased" else 0)
    assert a.param_count() == expected_total
    assert (a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim, a.ffn, a.vocab) == (
        ref["num_layers"], ref["hidden"], ref["heads"], ref["kv_heads"], ref["head_dim"],
        ref["ffn"], ref["vocab"])
    assert a.gated_mlp == ref["ffn_gated"]
    assert a.tied_embeddings == ref["tied_embeddings"]


def test_lookup_case_insensitive_and_org_optional():
    assert get_model("META-LLAMA/llama-2-7b-HF").id == "meta-llama/Llama-2-7b-hf"
    assert get_model("llama-2-7b-hf").id == "meta-llama/Llama-2-7b-hf"
    assert get_model("Llama-3.1-8B-Instruct").id == "meta-llama/Llama-3.1-8B"
    assert resolve_name("llama-3.1-8b-instruct") == "meta-llama/Llama-3.1-8B-Instruct"
    assert get_model("gpt2").id == get_model("openai-community/gpt2").id == "gpt2"
    assert get_model("google-bert/bert-large-uncased").id == "bert-large-uncased"


def test_unknown_model_lists_closest():
    with pytest.raises(UnknownIdError) as e:
        get_model("meta-llama/Llama-2-7b-hff")
    assert "meta-llama/Llama-2-7b-hf" in str(e.value)


def _spec(id, aliases=()):
    return ModelSpec(id=id, family="cnn", config={}, source="x", aliases=tuple(aliases))


def test_ambiguous_short_name_lists_candidates():
    cat = Catalog([_spec("org-a/net"), _spec("org-b/net")])
    with pytest.raises(AmbiguousModelError) as e:
        cat.get("net")
    assert "org-a/net" in str(e.value) and "org-b/net" in str(e.value)
    assert cat.get("ORG-B/NET").id == "org-b/net"


def test_duplicate_ids_or_aliases_rejected():
    with pytest.raises(CatalogError, match="already used"):
        Catalog([_spec("a/x"), _spec("b/y", aliases=["A/X"])])


def _write(d: Path, name: str, models) -> None:
    (d / name).write_text(json.dumps({"models": models}))


def test_loader_reads_every_file_and_tolerates_other_families(tmp_path):
    _write(tmp_path, "vision.json", [{"id": "torchvision/resnet50", "family": "cnn",
                                      "source": "https://pytorch.org", "config": {"depth": 50}}])
    _write(tmp_path, "dec.json", [{"id": "x/tiny", "family": "decoder", "source": "https://x",
                                   "config": {"hidden_size": 64, "num_hidden_layers": 2,
                                              "num_attention_heads": 4, "intermediate_size": 128,
                                              "vocab_size": 100}}])
    cat = load_catalog(tmp_path)
    assert {s.id for s in cat.list()} == {"torchvision/resnet50", "x/tiny"}
    assert cat.get("resnet50").family == "cnn"


def test_loader_checks_uniqueness_across_files(tmp_path):
    e = {"id": "a/b", "family": "cnn", "source": "https://x", "config": {}}
    _write(tmp_path, "one.json", [e])
    _write(tmp_path, "two.json", [e])
    with pytest.raises(CatalogError, match="a/b"):
        load_catalog(tmp_path)


@pytest.mark.parametrize("entry, what", [
    ({"family": "cnn", "source": "s", "config": {}}, "'id'"),
    ({"id": "a", "family": "cnn", "source": "", "config": {}}, "source"),
    ({"id": "a", "family": "decoder", "source": "s", "config": {"hidden_size": 8}}, "config"),
    ({"id": "a", "family": "encoder", "source": "s", "config": {
        "model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 8}}, "family"),
])
def test_loader_rejects_bad_entries(tmp_path, entry, what):
    _write(tmp_path, "bad.json", [entry])
    with pytest.raises(CatalogError, match=what):
        load_catalog(tmp_path)


def test_shipped_data_files_are_valid_and_unique():
    cat = load_catalog()
    names = [n.lower() for s in cat.list() for n in (s.id, *s.aliases)]
    assert len(names) == len(set(names))


def test_spec_from_architecture():
    s = spec_from_architecture({"params": 7e9})
    assert s.family == "decoder"
    assert abs(s.arch.param_count() - 7e9) < 0.02 * 7e9
    b = spec_from_architecture({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 6,
                                "num_attention_heads": 12, "intermediate_size": 3072,
                                "vocab_size": 30522})
    assert b.family == "encoder"
    assert spec_from_architecture(get_model("t5-small").config).family == "encoder-decoder"
    for bad in ([], {}, {"params": 7e9, "hidden_size": 4096}):
        with pytest.raises(ScenarioError, match="architecture"):
            spec_from_architecture(bad)
