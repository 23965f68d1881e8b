"""opi.llm.prompts: prompt files beside the module, each versioned by a hash of its text."""
import pytest

from opi.llm.prompts import Prompt, load_prompt

FIELDS = {"answer": {"sentences", "question"}, "relation": {"definitions", "sentences", "question", "answer", "labels"},
          "statements": {"question", "text"}, "correctness": {"question", "answer_statements", "truth_statements"},
          "judge": {"question", "truth", "answer"}, "finetune_system": {"definitions"}}


def test_the_version_is_the_first_12_hex_digits_of_the_texts_sha256():
    assert Prompt("x", "abc").version == "ba7816bf8f01"  # sha256("abc") = ba7816bf8f01cfea...
    prompt = load_prompt("answer")
    assert Prompt("answer", prompt.template + " ").version != prompt.version  # any edit, another version


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_every_prompt_renders_with_its_fields(name):
    prompt = load_prompt(name)
    text = prompt.render(**{field: f"<{field}>" for field in FIELDS[name]})
    assert all(f"<{field}>" in text for field in FIELDS[name])
    with pytest.raises(KeyError):
        prompt.render()  # a field left out is an error, not a blank


def test_literal_braces_survive_rendering():
    text = load_prompt("judge").render(question="Q", truth="T", answer="A")
    assert 'Reply with JSON only: {"score": 0, 3 or 7, "reason": "one short sentence saying why"}.' in text


def test_an_unknown_prompt_names_the_folder():
    with pytest.raises(ValueError, match=r"no prompt named 'nope' in opi/llm/prompts/"):
        load_prompt("nope")
