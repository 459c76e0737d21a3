"""Issue 20.8: a sequence longer than the model's positions is refused, naming `seq_len`, the
model and its limit, by the library, the form and every command alike (the rule lives in the
scenario validation). The limit is vLLM's (vllm/config/model.py `_get_and_verify_max_len`):
max_position_embeddings, times the rope_scaling factor unless the rope type already counts it
(llama3), yarn from original_max_position_embeddings x factor."""
import pytest

from vramplan.cli import main
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.scenario import Scenario, form

LLAMA31 = "meta-llama/Llama-3.1-8B"
H100 = "nvidia-h100-sxm5-80gb"
TINY = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512,
        "vocab_size": 1000, "max_position_embeddings": 4096}


def _refusal(d: dict) -> ScenarioError:
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(d)
    return exc.value


def test_llama31_seq_len_1e9_refused_naming_key_model_and_limit():
    # was accepted and estimated at 2,040,497 GiB
    err = _refusal({"model": LLAMA31, "seq_len": 10**9})
    assert err.key == "seq_len"
    assert "131,072 positions" in str(err) and LLAMA31 in str(err)
    # rope_type llama3: max_position_embeddings 131072 = 8192 x 8 already, not x 8 again
    assert "llama3" in str(err)
    assert Scenario.from_dict({"model": LLAMA31, "seq_len": 131072}).seq_len == 131072
    _refusal({"model": LLAMA31, "seq_len": 131073})


def test_estimate_refuses_too():
    with pytest.raises(ScenarioError, match="seq_len"):
        estimate({"model": LLAMA31, "seq_len": 10**9, "gpu": H100})


def test_generate_counts_prompt_plus_new_tokens():
    ok = {"model": LLAMA31, "task": "generate", "seq_len": 131072 - 256, "new_tokens": 256}
    assert Scenario.from_dict(ok).new_tokens == 256
    err = _refusal({**ok, "new_tokens": 257})
    assert err.key == "seq_len" and "seq_len + new_tokens = 131,073" in str(err)


def test_serve_max_model_len_beyond_positions_refused():
    err = _refusal({"model": LLAMA31, "task": "serve", "serving": {"max_model_len": 200000}})
    assert err.key == "serving.max_model_len" and "131,072 positions" in str(err)
    err = _refusal({"model": LLAMA31, "task": "serve", "seq_len": 200000})
    assert err.key == "seq_len"
    # the default max_model_len is the limit itself (vLLM's derived max_model_len)
    assert Scenario.from_dict({"model": LLAMA31, "task": "serve"}).serving.max_model_len \
        == 131072


@pytest.mark.parametrize("rope, limit", [
    (None, 4096),
    ({"rope_type": "linear", "factor": 4.0}, 4096 * 4),            # positions x factor
    ({"type": "dynamic", "factor": 2.0}, 4096 * 2),                # the older `type` key
    ({"rope_type": "yarn", "factor": 32.0,
      "original_max_position_embeddings": 1024}, 1024 * 32),     # yarn: original x factor
    ({"rope_type": "llama3", "factor": 8.0,
      "original_max_position_embeddings": 512}, 4096),           # already counted
])
def test_rope_scaling_factor(rope, limit):
    arch = dict(TINY, **({"rope_scaling": rope} if rope else {}))
    assert Scenario.from_dict({"architecture": arch, "seq_len": limit}).seq_len == limit
    err = _refusal({"architecture": arch, "seq_len": limit + 1})
    assert err.key == "seq_len" and f"{limit:,} positions" in str(err)


def test_no_stated_positions_no_refusal():
    # a size-only decoder states no positions; T5's relative buckets have no table to end
    assert Scenario.from_dict({"architecture": {"params": 7e9}, "seq_len": 100000}).seq_len \
        == 100000
    assert Scenario.from_dict({"model": "t5-small", "seq_len": 4096}).seq_len == 4096


def test_learned_positions_message_unchanged():
    err = _refusal({"model": "gpt2", "seq_len": 2048})
    assert str(err).endswith("2,048 tokens exceed the 1,024 positions 'gpt2' has (learned "
                             "position embeddings)")


def test_form_bounds_and_check_say_the_same():
    f = {x.key: x for x in form.fields({"model": LLAMA31})}
    assert f["seq_len"].max == 131072
    errors = form.check({"model": LLAMA31, "seq_len": 10**9})
    assert "131,072 positions" in errors["seq_len"]


@pytest.mark.parametrize("command", ["estimate", "advise", "sweep", "report"])
def test_every_command_refuses_with_the_same_message(command, tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text('{"model": "%s", "seq_len": 1000000000, "gpu": "%s"}' % (LLAMA31, H100))
    argv = [command, "--scenario", str(f)]
    if command == "report":
        argv += ["-o", str(tmp_path / "r.html")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "seq_len" in err and "131,072 positions" in err and LLAMA31 in err
