"""The record shapes people have (minitrain/data/record_shapes.py): ShareGPT, Alpaca and TRL's conversational
prompt/completion read as chat, each rendered by the template and masked as written out here by hand from the
template's text; preference rows refused with the reason; mixed shapes and malformed rows one error naming the
file, the line and the key, never a traceback."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from text_fixtures import TinyTokenizer

from minitrain.common.errors import UserError
from minitrain.data.text_examples import encode_record
from minitrain.data.text_records import read_file

SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


def one(tmp_path, row: dict, name: str = "data.jsonl"):
    path = tmp_path / name
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", "utf-8")
    [record] = read_file(path)
    return record


def by_hand(tok, segments: list[tuple[str, bool]]) -> tuple[list[int], list[bool]]:
    """The ids and loss mask of `segments` (text, counted) written out by hand: each segment tokenized on its own
    (each cut falls where the template's text of the prompt ends or at a special token), the first token never
    counted."""
    ids, mask = [], []
    for text, counted in segments:
        piece = tok.encode(text)
        ids += piece
        mask += [counted] * len(piece)
    return ids, [False, *mask[1:]]


def check(tok, record, segments):
    example = encode_record(record, tok, "completion")
    assert tok.apply_chat_template(record.data["messages"]) == "".join(text for text, _ in segments)
    assert (example.ids, example.loss_mask) == by_hand(tok, segments)


def test_sharegpt_is_chat_with_from_value_roles_mapped(tmp_path):
    tok = TinyTokenizer()
    record = one(tmp_path, {"conversations": [
        {"from": "system", "value": "Eres breve."}, {"from": "human", "value": "Hola"},
        {"from": "gpt", "value": "¡Hola!"}, {"from": "human", "value": "Adiós"}, {"from": "gpt", "value": "Chao"}],
        "id": "x1"})
    assert (record.kind, record.shape) == ("chat", "sharegpt")
    assert [m["role"] for m in record.data["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    check(tok, record, [
        ("<|im_start|>system\nEres breve.<|im_end|>\n<|im_start|>user\nHola<|im_end|>\n<|im_start|>assistant\n",
         False),
        ("¡Hola!<|im_end|>", True),
        ("\n<|im_start|>user\nAdiós<|im_end|>\n<|im_start|>assistant\n", False),
        ("Chao<|im_end|>", True), ("\n", False)])


@pytest.mark.parametrize("extra, user", [("vender", "Conjuga el verbo.\n\nvender"), ("", "Conjuga el verbo."),
                                         (" \n", "Conjuga el verbo."), (None, "Conjuga el verbo.")])
def test_alpaca_puts_the_input_after_the_instruction_a_blank_line_between(tmp_path, extra, user):
    tok = TinyTokenizer()
    row = {"instruction": "Conjuga el verbo.", "output": "vendo", **({} if extra is None else {"input": extra})}
    record = one(tmp_path, row)
    assert (record.kind, record.shape) == ("chat", "alpaca")
    check(tok, record, [(f"{SYSTEM}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n", False),
                        ("vendo<|im_end|>", True), ("\n", False)])


def test_a_conversational_prompt_completion_learns_the_completion_only(tmp_path):
    """TRL's shape: an assistant message inside the prompt is context (a `messages` record would learn it)."""
    tok = TinyTokenizer()
    prompt = [{"role": "user", "content": "Hola"}, {"role": "assistant", "content": "¿Sí?"},
              {"role": "user", "content": "2 + 2"}]
    record = one(tmp_path, {"prompt": prompt, "completion": [{"role": "assistant", "content": "4"}]})
    assert (record.kind, record.shape, record.data["completion_from"]) == ("chat", "chat_prompt_completion", 3)
    context = (f"{SYSTEM}<|im_start|>user\nHola<|im_end|>\n<|im_start|>assistant\n¿Sí?<|im_end|>\n"
               "<|im_start|>user\n2 + 2<|im_end|>\n<|im_start|>assistant\n")
    check(tok, record, [(context, False), ("4<|im_end|>", True), ("\n", False)])
    # two completion messages are one answer, the template's text between them included (as TRL counts them)
    two = one(tmp_path, {"prompt": prompt[:1], "completion": [{"role": "assistant", "content": "4"},
                                                               {"role": "assistant", "content": "¿Algo más?"}]})
    check(tok, two, [(f"{SYSTEM}<|im_start|>user\nHola<|im_end|>\n<|im_start|>assistant\n", False),
                     ("4<|im_end|>\n<|im_start|>assistant\n¿Algo más?<|im_end|>", True), ("\n", False)])
    everything = encode_record(record, tok, "all")
    assert everything.ids == tok.encode(tok.apply_chat_template(record.data["messages"]))
    assert not everything.loss_mask[0] and all(everything.loss_mask[1:])


def test_string_prompt_completion_is_still_the_plain_shape(tmp_path):
    record = one(tmp_path, {"prompt": "2 + 2 =", "completion": " 4"})
    assert (record.kind, record.shape, record.data) == ("prompt_completion", "prompt_completion",
                                                        {"prompt": "2 + 2 =", "completion": " 4"})


@pytest.mark.parametrize("row, keys", [
    ({"prompt": "2 + 2 =", "chosen": " 4", "rejected": " 5"}, "chosen, prompt, rejected"),
    ({"chosen": [{"role": "user", "content": "a"}], "rejected": [{"role": "user", "content": "b"}]},
     "chosen, rejected"),
    ({"chosen": "a"}, "chosen"),
    ({"prompt": "2 + 2 =", "completion": " 5", "label": False}, "completion, label, prompt"),
])  # fmt: skip
def test_preference_rows_are_refused_with_the_reason(tmp_path, row, keys):
    path = tmp_path / "prefs.jsonl"
    path.write_text('{"text": "bien"}\n' + json.dumps(row) + "\n", "utf-8")
    with pytest.raises(UserError) as caught:
        read_file(path)
    assert str(caught.value) == f"{path}:2: a preference record ({keys}): no preference training yet (DPO, ORPO, " \
        "KTO): minitrain fine-tunes on one answer per prompt; keep the chosen answer as a completion or an " \
        "assistant message to train on it"
    assert caught.value.exit_code == 2


def test_a_label_beside_text_is_not_a_preference(tmp_path):
    assert one(tmp_path, {"text": "hola", "label": True}).shape == "text"


BAD = [
    ('{"conversations": []}', r"'conversations' must be a non-empty list of \{from, value\} objects, got an empty"),
    ('{"conversations": [{"from": "human", "value": "a", "weight": 0}]}',
     r"conversations\[0\] must have exactly the keys from and value, got \['from', 'value', 'weight'\]"),
    ('{"conversations": [{"from": "bing", "value": "a"}]}',
     r"conversations\[0\]: from 'bing' is not one of human, gpt, system, user, assistant"),
    ('{"conversations": [{"from": ["gpt"], "value": "a"}]}', r"conversations\[0\]: from \['gpt'\] is not one of"),
    ('{"conversations": [{"from": "human", "value": "a"}, {"from": "system", "value": "b"}]}',
     r"conversations\[1\]: a system message may only come first"),
    ('{"conversations": [{"from": "gpt", "value": 3}]}', r"conversations\[0\]: value must be a string, got an integ"),
    ('{"instruction": "a"}', r"has 'instruction' but no 'output'"),
    ('{"output": "a"}', r"has 'output' but no 'instruction'"),
    ('{"instruction": "a", "input": 3, "output": "b"}', r"'input' must be a string, got an integer"),
    ('{"instruction": " ", "output": "b"}', r"'instruction' is empty"),
    ('{"instruction": "a", "output": ""}', r"'output' is empty"),
    ('{"prompt": [], "completion": [{"role": "assistant", "content": "b"}]}', r"'prompt' must be a non-empty list"),
    ('{"prompt": [{"role": "user", "content": "a"}], "completion": "b"}', r"'completion' must be a non-empty list"),
    ('{"prompt": [{"role": "user", "content": "a"}]}', r"has 'prompt' but no 'completion'"),
    ('{"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "user", "content": "b"}]}',
     r"completion\[0\]: role 'user': a completion is the assistant's messages"),
    ('{"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "system", "content": "b"}]}',
     r"completion\[0\]: a system message may only come first"),
    ('{"messages": [{"role": "user", "content": "a"}], "conversations": []}',
     r"keys of two shapes of record \(conversations, messages\): keep the keys of one of chat, sharegpt"),
    ('{"text": "a", "instruction": "b", "output": "c"}', r"keys of two shapes of record \(instruction, output, text"),
]  # fmt: skip


@pytest.mark.parametrize("line, message", BAD)
def test_a_malformed_row_of_a_new_shape_is_one_error_naming_the_line_and_key(tmp_path, line, message):
    path = tmp_path / "data.jsonl"
    path.write_text(line + "\n", "utf-8")
    with pytest.raises(UserError, match=message) as caught:
        read_file(path)
    assert str(caught.value).startswith(f"{path}:1: ") and caught.value.exit_code == 2


def test_shapes_that_mix_are_refused_naming_both_records(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]})
                    + "\n" + json.dumps({"messages": [{"role": "user", "content": "a"}]}) + "\n", "utf-8")
    with pytest.raises(UserError) as caught:
        read_file(path)
    assert str(caught.value) == f"{path}:2: a chat record, but {path}:1 is a sharegpt record: all records must be " \
        "of one shape"


KEYS = ["text", "prompt", "completion", "messages", "conversations", "instruction", "input", "output", "chosen",
        "rejected", "label", "id"]
TURN_KEYS = ["role", "content", "from", "value", "weight"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", " ", "a", "user", "assistant", "system",
                                                                      "human", "gpt", "\ud800"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(TURN_KEYS), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4))
def test_any_row_is_read_or_one_error_line_never_a_traceback(tmp_path, row):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(row) + "\n", "utf-8")
    try:
        [record] = read_file(path)
    except UserError as e:
        assert str(e).startswith(f"{path}:1: ") and "\n" not in str(e) and e.exit_code == 2
    else:
        assert record.kind in ("text", "prompt_completion", "chat") and record.shape
