"""Issue 19.1: a number JSON refuses (1e999, NaN, -Infinity) is refused naming its key, in a
scenario file (one object or JSON Lines) and anywhere safejson reads; before the message said
"1e999 is too large" without the key."""
import pytest

from vramplan import safejson
from vramplan.cli import main
from vramplan.errors import ScenarioError
from vramplan.scenario import load_scenarios


@pytest.mark.parametrize("text, key, words", [
    ('{"model": "gpt2", "batch_size": 1e999}', "batch_size", "1e999 is too large"),
    ('{"model": "gpt2", "batch_size": NaN}', "batch_size", "NaN is not a number"),
    ('{"model": "gpt2", "lora": {"rank": -Infinity}}', "lora.rank", "-Infinity is not"),
    ('{"a": [{"b": 1}, {"c": Infinity}]}', "a[1].c", "Infinity is not"),
])
def test_safejson_names_the_key(text, key, words):
    with pytest.raises(safejson.BadNumberError) as exc:
        safejson.loads(text, "thing")
    assert exc.value.key == key
    assert str(exc.value) == f"thing: key '{key}': " + str(exc.value).split(": ", 2)[2]
    assert words in str(exc.value)


def test_top_level_number_has_no_key():
    with pytest.raises(safejson.BadNumberError) as exc:
        safejson.loads("1e999", "thing")
    assert exc.value.key == "" and str(exc.value) == "thing: 1e999 is too large"


def test_scenario_file_names_the_key(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text('{"model": "gpt2", "batch_size": 1e999, "gpu": "nvidia-l4"}')
    assert main(["estimate", "--scenario", str(f)]) == 2
    err = capsys.readouterr().err
    assert "key 'batch_size': 1e999 is too large" in err and "Traceback" not in err


def test_json_lines_line_is_a_scenario_error_naming_the_key(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text('{"model": "gpt2"}\n{"model": "gpt2", "seq_len": -Infinity}\n')
    ok, bad = load_scenarios(f)
    assert isinstance(bad, ScenarioError) and bad.key == "seq_len"
    assert str(bad) == "scenario key 'seq_len': line 2: -Infinity is not a number vramplan " \
                       "accepts"
