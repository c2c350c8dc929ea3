"""Damaged chat templates (issue 43, root causes 3 and 4): a template is a stranger's program, so each one generated
from a grammar of Jinja constructs (loops over huge ranges, string * huge int, tojson with a huge indent, macro
recursion, include/import/extends, huge integer literals, undefined names, filters, format widths) renders to a
string or gives one UserError within a couple of seconds and bounded memory; never another exception. Then each
case of the issue through `minitrain sample --chat` (a child with a timeout and a memory limit) and `init`.

`make test` runs a fixed-seed slice (MINITRAIN_DAMAGE_EXAMPLES for more, random seeds)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment
from test_hub_pretrained import hf_folder
from test_pretrained_runs import CHATS, chat_lines

import minitrain.data.chat_template as chat_template
from minitrain.common.errors import UserError
from minitrain.course.chat_fixtures import CHATML
from minitrain.data.chat_template import render_chat

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "60"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
MESSAGES = [{"role": "user", "content": "hola"}, {"role": "assistant", "content": "como"}]
SPECIAL = {"bos_token": "<s>", "eos_token": "<|im_end|>"}

# The issue's cases: each hung, grew without bound or escaped as a traceback before the fix.
ISSUE_CASES = {
    "string_times_huge_int": "{{ 'x' * 10**8 }}",
    "nested_ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "tojson_huge_indent": "{{ messages|tojson(indent=100000000) }}",
    "range_over_the_sandbox_limit": "{% for i in range(10**6) %}{% endfor %}x",
    "recursion": "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}",
    "include": "{% include 'other.jinja' %}",
    "import": "{% import 'other.jinja' as other %}x",
    "extends": "{% extends 'base.jinja' %}",
    "digits_over_4300": "{{ 10**5000 }}",
    "literal_over_4300_digits": "{{ " + "7" * 5000 + " }}",
    "renders_nothing": "{% for m in messages %}{% endfor %}",
}


class Hang(Exception):
    pass


def guarded_render(source: str, seconds: float = 4.0) -> str | UserError:
    """render_chat's result, or its UserError; a Hang past `seconds` (SIGALRM interrupts a Python loop)."""
    def alarm(signum, frame):
        raise Hang(f"still rendering after {seconds} s: {source[:80]!r}")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return render_chat(source, MESSAGES, True, SPECIAL, "tokenizer_config.json: chat_template")
    except UserError as e:
        return e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_bounded(source: str) -> str | UserError:
    tracemalloc.start()
    try:
        outcome = guarded_render(source)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 600 << 20, (source, peak)  # the text's limit, plus what the sandbox holds on the way
    if isinstance(outcome, UserError):
        assert outcome.exit_code == 2 and str(outcome).startswith("tokenizer_config.json: chat_template: "), outcome
        assert "\n" not in str(outcome), outcome
    else:
        assert 0 < len(outcome) <= chat_template.OUTPUT_LIMIT
    return outcome


@pytest.fixture(autouse=True)
def short_time_limit(monkeypatch):
    monkeypatch.setattr(chat_template, "TIME_LIMIT", 1.0)


# --- the grammar ---------------------------------------------------------------------------------------------

huge = st.sampled_from(["10**8", "100000000", "2**40", "99999999999", "10**5000", "-10**9"])
small = st.integers(-3, 40).map(str)
number = st.one_of(small, huge)
word = st.sampled_from(["'x'", "'ab\\n'", "messages[0].content", "messages[0]['role']", "bos_token", "nope",
                        "nope.x", "''", "'%09999999d'", "'{:>99999999}'", "[1, 2]", "{'a': 1}", "messages"])


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(["*", "**", "+", "%", "//", "-"]), st.one_of(inner, number)).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, st.sampled_from(["tojson(indent={})", "center({})", "indent({})", "wordwrap({})",
                                          "batch({})", "truncate({})", "format({})", "join(' ' * {})", "slice({})",
                                          "replace('x', 'yy' * {})"]), number).map(
            lambda t: f"({t[0]})|{t[1].format(t[2])}"),
        st.tuples(inner, st.sampled_from(["length", "string", "list", "tojson", "upper", "trim", "first", "sum",
                                          "unique|list", "reverse|list"])).map(lambda t: f"({t[0]})|{t[1]}"),
        st.tuples(inner, st.sampled_from(["ljust({})", "center({})", "zfill({})", "format({})", "split()",
                                          "__class__", "__class__.__mro__", "__init__.__globals__"]), number).map(
            lambda t: f"({t[0]}).{t[1].format(t[2])}"),
        number.map(lambda n: f"range({n})"),
    )


expression = st.recursive(st.one_of(word, number), _combine, max_leaves=5)


def _blocks(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(number, inner).map(lambda t: f"{{% for i in range({t[0]}) %}}{t[1]}{{% endfor %}}"),
        st.tuples(expression, inner).map(lambda t: f"{{% for c in {t[0]} %}}{t[1]}{{% endfor %}}"),
        st.tuples(expression, inner).map(lambda t: f"{{% if {t[0]} %}}{t[1]}{{% else %}}x{{% endif %}}"),
        inner.map(lambda body: f"{{% macro m(n) %}}{body}{{{{ m(n + 1) }}}}{{{{ m(n + 1) }}}}{{% endmacro %}}"
                               "{{ m(0) }}"),
        st.tuples(number, inner).map(lambda t: f"{{% set ns = namespace(s='ab') %}}{{% for i in range({t[0]}) %}}"
                                               f"{{% set ns.s = ns.s + ns.s %}}{t[1]}{{% endfor %}}{{{{ ns.s }}}}"),
        st.lists(inner, min_size=2, max_size=3).map("".join),
    )


statement = st.recursive(
    st.one_of(expression.map(lambda e: f"{{{{ {e} }}}}"), st.sampled_from(
        ["hola", "", "{% include 'x' %}", "{% import 'x' as y %}", "{% from 'x' import y %}", "{% extends 'x' %}",
         "{% for %}", "{{ raise_exception('no') }}", "{% break %}", "{{ strftime_now('%Y') }}",
         "{{ cycler.__init__.__globals__.os }}", "{% for m in messages %}{{ m.content }}{% endfor %}"])),
    _blocks, max_leaves=4)


@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(statement)
def test_a_generated_template_renders_or_is_one_user_error_in_bounded_time_and_memory(source):
    assert_bounded(source)


# --- each case of the issue, and what holds --------------------------------------------------------------------

@pytest.mark.parametrize("name", ISSUE_CASES)
def test_each_case_of_the_issue_is_one_user_error(name):
    outcome = assert_bounded(ISSUE_CASES[name])
    assert isinstance(outcome, UserError), outcome
    if name == "renders_nothing":
        assert "writes nothing for this conversation" in str(outcome)


@pytest.mark.parametrize("escape", ["{{ ''.__class__.__mro__[1].__subclasses__() }}",
                                    "{{ cycler.__init__.__globals__.os.system('echo pwned') }}",
                                    "{{ messages.append(1) }}{{ messages }}"])
def test_the_sandbox_still_refuses_escapes(escape):
    outcome = guarded_render(escape)
    assert isinstance(outcome, UserError) and str(outcome).endswith("object is unsafe.)"), outcome


def test_smollm2_chatml_renders_byte_for_byte_as_plain_jinja2_does():
    text = render_chat(CHATML, MESSAGES, True, SPECIAL)
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(CHATML)
    assert text == plain.render(messages=MESSAGES, add_generation_prompt=True, **SPECIAL)
    assert text.endswith("<|im_start|>user\nhola<|im_end|>\n<|im_start|>assistant\ncomo<|im_end|>\n"
                         "<|im_start|>assistant\n")


# --- through the commands --------------------------------------------------------------------------------------

def base_with_template(tmp_path: Path, template: str) -> Path:
    """The tiny Llama base of test_hub_pretrained with `template` as its chat template, and chat data beside it."""
    base = tmp_path / "base"
    hf_folder(base, bf16=False)
    config_path = base / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps({**config, "chat_template": template}), encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(chat_lines(CHATS * 2), encoding="utf-8")
    (tmp_path / "data" / "val.jsonl").write_text(chat_lines(CHATS[:2]), encoding="utf-8")
    return base


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def child(argv: list) -> subprocess.CompletedProcess:
    """`python -m minitrain ARGV` in a child with 6 GB of address space; a test failure past 60 s."""
    try:
        return subprocess.run([sys.executable, "-m", "minitrain", *map(str, argv)], capture_output=True, text=True,
                              timeout=60, preexec_fn=_limit_memory, env={**os.environ, "PYTHONPATH": os.getcwd()})
    except subprocess.TimeoutExpired:
        pytest.fail(f"minitrain {argv[0]} still running after 60 s")


def assert_one_error_line(done: subprocess.CompletedProcess, base: Path) -> None:
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().endswith(errors[0]) and f"{base / 'tokenizer_config.json'}: chat_template: " in errors[0]


@pytest.mark.parametrize("name", ISSUE_CASES)
def test_sample_chat_gives_one_error_line_for_each_case(tmp_path, name):
    base = base_with_template(tmp_path, ISSUE_CASES[name])
    assert_one_error_line(child(["sample", base, "--prompt", "hola", "--chat", "--max-new-tokens", "2"]), base)


@pytest.mark.parametrize("name", ["string_times_huge_int", "nested_ranges", "recursion", "include",
                                  "digits_over_4300", "renders_nothing"])
def test_init_gives_one_error_line_naming_the_template(tmp_path, name):
    base = base_with_template(tmp_path, ISSUE_CASES[name])
    assert_one_error_line(child(["init", "--base", base, "--data", tmp_path / "data", "-o", tmp_path / "c.yaml"]),
                          base)
    assert not (tmp_path / "c.yaml").exists()
