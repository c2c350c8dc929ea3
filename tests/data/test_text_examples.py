"""Records to token examples with a real (tiny) BPE tokenizer: EOS and BOS, prompt/completion and chat loss
masks, assistant turns found prefix by prefix, and templates that break the prefix property refused."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from text_fixtures import REWRITING, TinyTokenizer, inst_tokenizer

from minitrain.common.errors import UserError
from minitrain.data.text_examples import encode_record, encode_records
from minitrain.data.text_records import TextRecord

VERB = [{"role": "user", "content": "Conjuga «vender» en condicional, primera persona del plural."},
        {"role": "assistant", "content": "venderíamos"}]


def record(kind: str, where: str = "data.jsonl:4", **data) -> TextRecord:
    return TextRecord(where, kind, data)


def counted_runs(tokenizer, example) -> list[str]:
    """The decoded text of each run of consecutive tokens the loss counts."""
    runs = itertools.groupby(zip(example.ids, example.loss_mask, strict=True), key=lambda pair: pair[1])
    return [tokenizer.decode([i for i, _ in run]) for counted, run in runs if counted]


def test_text_is_its_tokens_then_eos_and_every_token_after_the_first_counts():
    tok = TinyTokenizer()
    example = encode_record(record("text", text="Hola, ¿qué tal?"), tok)
    assert example.ids == [*tok.encode("Hola, ¿qué tal?"), tok.eos_id]
    assert example.loss_mask == [False] + [True] * (len(example.ids) - 1) and example.where == "data.jsonl:4"
    llama = inst_tokenizer()  # its encode adds BOS
    ids = encode_record(record("text", text="Hola"), llama).ids
    assert ids[0] == llama.bos_id and ids[-1] == llama.eos_id and ids.count(llama.eos_id) == 1


def test_an_eos_the_tokenizer_already_appends_is_not_doubled():
    tok = TinyTokenizer()
    ids = encode_record(record("text", text="Hola<|im_end|>"), tok).ids
    assert ids == [*tok.encode("Hola"), tok.eos_id]


def test_prompt_completion_counts_the_completion_and_eos_only():
    tok = TinyTokenizer()
    example = encode_record(record("prompt_completion", prompt="2 + 2 =", completion=" 4"), tok, "completion")
    assert example.ids == [*tok.encode("2 + 2 ="), *tok.encode(" 4"), tok.eos_id]
    assert counted_runs(tok, example) == [" 4<|im_end|>"]
    everything = encode_record(record("prompt_completion", prompt="2 + 2 =", completion=" 4"), tok, "all")
    assert everything.ids == example.ids and everything.loss_mask == [False] + [True] * (len(example.ids) - 1)
    no_prompt = encode_record(record("prompt_completion", prompt="", completion="Érase"), tok, "completion")
    assert no_prompt.loss_mask[0] is False and all(no_prompt.loss_mask[1:])


def test_a_prompt_completion_record_starts_with_bos_when_the_tokenizer_has_one():
    """Llama's tokenizer puts BOS first (add_special_tokens): the prompt begins the example, so the example begins
    with BOS, exactly once (none before the completion), whatever loss_on says and even for an empty prompt."""
    llama = inst_tokenizer()
    for prompt, loss_on in (("2 + 2 =", "completion"), ("2 + 2 =", "all"), ("", "completion")):
        example = encode_record(record("prompt_completion", prompt=prompt, completion=" 4"), llama, loss_on)
        assert example.ids[0] == llama.bos_id and example.ids.count(llama.bos_id) == 1
        assert example.ids == [llama.bos_id, *llama.encode(prompt), *llama.encode(" 4"), llama.eos_id]
        assert example.loss_mask[0] is False


def test_a_verb_in_chat_form_counts_the_answer_and_its_end_token():
    tok = TinyTokenizer()
    example = encode_record(record("chat", messages=VERB), tok, "completion")
    assert tok.decode(example.ids) == tok.apply_chat_template(VERB)
    assert counted_runs(tok, example) == ["venderíamos<|im_end|>"]
    everything = encode_record(record("chat", messages=VERB), tok, "all")
    assert everything.ids == example.ids == tok.encode(tok.apply_chat_template(VERB))
    # The tokens before the answer end as the generation prompt's do: what the model reads when it answers.
    first = example.loss_mask.index(True)
    prompt = tok.encode(tok.apply_chat_template(VERB[:1], add_generation_prompt=True))
    assert example.ids[:first] == prompt


def test_every_assistant_turn_counts_and_nothing_else():
    tok = inst_tokenizer()
    chat = [*VERB, {"role": "user", "content": "¿Y en futuro?"}, {"role": "assistant", "content": "venderemos"}]
    example = encode_record(record("chat", messages=chat), tok, "completion")
    assert example.ids[0] == tok.bos_id
    assert counted_runs(tok, example) == [" venderíamos</s>", " venderemos</s>"]


def test_loss_on_completion_needs_something_to_complete():
    tok = TinyTokenizer()
    with pytest.raises(UserError, match=r"^data\.jsonl:4: loss_on: completion needs prompt/completion or chat"):
        encode_records([record("text", text="hola")], tok, "completion")
    with pytest.raises(UserError, match=r"^data\.jsonl:4: .*no assistant turn to learn"):
        encode_record(record("chat", messages=VERB[:1]), tok, "completion")
    with pytest.raises(UserError, match=r"data\.loss_on must be one of \['all', 'completion'\], got 'answer'"):
        encode_records([record("text", text="hola")], tok, "answer")


def test_a_tokenizer_without_eos_or_chat_template_is_refused_naming_the_record():
    with pytest.raises(UserError, match=r"^data\.jsonl:4: the tokenizer has no EOS token"):
        encode_record(record("text", text="hola"), TinyTokenizer(eos=None))
    with pytest.raises(UserError, match=r"^data\.jsonl:4: a chat record, but the tokenizer has no chat template"):
        encode_record(record("chat", messages=VERB), TinyTokenizer(chat_template=None))


def test_a_template_that_rewrites_earlier_turns_is_refused_for_completion_masks():
    tok = TinyTokenizer(REWRITING)
    two_turns = [*VERB, {"role": "user", "content": "¿Y en futuro?"}, {"role": "assistant", "content": "venderemos"}]
    with pytest.raises(UserError, match=r"^data\.jsonl:4: cannot find assistant message 1 .* rewrites earlier turns"):
        encode_record(record("chat", messages=two_turns), tok, "completion")
    assert encode_record(record("chat", messages=two_turns), tok, "all").ids  # loss_on: all needs no turns


def test_a_template_error_is_a_user_error_naming_the_record():
    tok = TinyTokenizer("{{ raise_me() }}")
    with pytest.raises(UserError,
                       match=r"^data\.jsonl:4: tiny chat template: the chat template cannot render this conversation"):
        encode_record(record("chat", messages=VERB), tok)


words = st.text(alphabet="ab ñ\n.¿?«»", min_size=0, max_size=12)


@st.composite
def conversations(draw):
    messages = [{"role": "system", "content": draw(words)}] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 3))):
        messages += [{"role": "user", "content": draw(words)}, {"role": "assistant", "content": draw(words)}]
    return messages


@settings(max_examples=60, deadline=None, derandomize=True)
@given(conversations(), st.sampled_from(["chatml", "inst"]))
def test_chat_masks_count_exactly_the_assistant_contents_and_end_tokens(messages, template):
    """Whatever the contents (spaces and newlines a byte-level BPE would merge across a cut included): the counted
    runs decode to each assistant turn's content and end token, and all the tokens decode to the rendered text."""
    tok = TinyTokenizer() if template == "chatml" else inst_tokenizer()
    example = encode_record(record("chat", messages=messages), tok, "completion")
    assert tok.decode(example.ids) == tok.apply_chat_template(messages)
    end = "<|im_end|>" if template == "chatml" else "</s>"
    space = "" if template == "chatml" else " "
    expected = [space + m["content"] + end for m in messages if m["role"] == "assistant"]
    counted = "".join(counted_runs(tok, example))
    assert counted == "".join(expected)
    assert sum(example.loss_mask) == sum(len(tok.encode(text)) for text in expected)


def test_a_tokenizer_that_merges_across_a_cut_cannot_blur_the_mask():
    tok = TinyTokenizer()  # its BPE joins "\n" with the spaces after it: "\n " then " ab"
    chat = [{"role": "user", "content": "hola"}, {"role": "assistant", "content": "  ab"}]
    whole = tok.encode(tok.apply_chat_template(chat))
    example = encode_record(record("chat", messages=chat), tok, "completion")
    assert example.ids != whole and tok.decode(example.ids) == tok.decode(whole)  # the same text, cut at the turn
    assert counted_runs(tok, example) == ["  ab<|im_end|>"]
