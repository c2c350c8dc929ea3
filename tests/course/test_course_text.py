"""The course text (theory/, lab/ and solutions/) stays bilingual, in sync, and true to the repository.

Every `name.md` (English) has a `name.es.md` (Spanish) twin and vice versa. Twins have the same headings (count
and levels), the same code blocks (count and language tags), the same shell commands, and cite the same
repository paths. Every path cited in backticks (`minitrain/loop.py`, `tests/autograd/test_tensor.py::test_name`) and
every dotted name (`minitrain.x.name`) exists, and every relative Markdown link resolves, so a student reading beside
the code never follows a dead reference. Every number the text quotes to two decimals or more is a committed
result (a results file, a manifest, a log or a report under experiments/) rounded as quoted, or a constant
listed here with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("theory", "lab", "solutions")
# Backticked text that starts with one of these names a file or folder of the repository.
TOP_LEVEL = ("minitrain/", "scripts/", "experiments/", "data/", "models/", "tests/", "theory/", "lab/",
             "solutions/", "benchmarks/", "docs/")  # fmt: skip
TOP_FILES = ("Makefile", "pyproject.toml", "README.md", "LICENSE")
PLACEHOLDER = re.compile(r"[<>*{}\[\] ]")  # `models/minigpt-phase18-<hash>.safetensors` is a pattern, not a path
FENCE = re.compile(r"^(```+|~~~+)(.*)$")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOTTED = re.compile(r"^minitrain(\.[A-Za-z_]\w*)+$")
# A code block quoted from the repository is announced by `<!-- excerpt: minitrain/x.py -->` on the line before.
EXCERPT = re.compile(r"^<!-- excerpt: (\S+) -->$")


def course_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*.md"))


def english_files() -> list[Path]:
    return [p for p in course_files() if not p.name.endswith(".es.md")]


def twin_of(path: Path) -> Path:
    if path.name.endswith(".es.md"):
        return path.with_name(path.name[: -len(".es.md")] + ".md")
    return path.with_name(path.name[: -len(".md")] + ".es.md")


class Page(NamedTuple):
    """One Markdown file, split into what the checks read."""

    levels: list[int]  # heading levels, in order (`## x` -> 2); lines inside code blocks are not headings
    languages: list[str]  # the language tag of each fenced code block, in order
    prose: str  # the text outside code blocks
    shell: str  # the text of the `bash` code blocks
    excerpts: list[tuple[str, str]]  # (source path, code) of blocks marked `<!-- excerpt: path -->`


def parse(path: Path) -> Page:
    levels, languages, prose, shell, excerpts = [], [], [], [], []
    fence, source, previous = None, None, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        match = FENCE.match(line.strip())
        if fence is None and match:
            fence = match.group(1)
            languages.append(match.group(2).strip())
            marker = EXCERPT.match(previous.strip())
            source = marker.group(1) if marker else None
            if source:
                excerpts.append((source, ""))
        elif fence is not None:
            if line.strip() == fence:
                fence = None
            else:
                if languages[-1] == "bash":
                    shell.append(line)
                if source:
                    excerpts[-1] = (source, excerpts[-1][1] + line + "\n")
        else:
            heading = re.match(r"^(#{1,6}) \S", line)
            if heading:
                levels.append(len(heading.group(1)))
            prose.append(line)
        if line.strip():
            previous = line
    assert fence is None, f"{path.relative_to(ROOT)}: a code block is never closed"
    return Page(levels, languages, "\n".join(prose), "\n".join(shell), excerpts)


def _path_tokens(text: str) -> set[str]:
    found = set()
    for token in text.split():
        token = token.strip("'\"").rstrip(",;.)")
        if PLACEHOLDER.search(token.split("::")[0]):
            continue
        if token.startswith(TOP_LEVEL) or token in TOP_FILES:
            found.add(token)
    return found


def cited_paths(page: Page) -> set[str]:
    """Repository paths cited in backticks in the prose, or written in a `bash` block (commands' arguments)."""
    found = set().union(*(_path_tokens(span) for span in INLINE_CODE.findall(page.prose)))
    return found | _path_tokens(page.shell)


def dotted_names(prose: str) -> set[str]:
    return {span for span in INLINE_CODE.findall(prose) if DOTTED.match(span)}


def test_there_is_course_text():
    names = {p.name for p in english_files()}
    assert {"README.md", "00-motivation.md"} <= {p.name for p in english_files() if p.parent.name == "theory"}
    assert "README.md" in names


@pytest.mark.parametrize("path", course_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_file_has_its_twin(path):
    assert twin_of(path).is_file(), f"{path.relative_to(ROOT)} has no twin {twin_of(path).relative_to(ROOT)}"


@pytest.mark.parametrize("path", english_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_twins_have_the_same_structure(path):
    en, es = parse(path), parse(twin_of(path))
    where = f"{path.relative_to(ROOT)} vs {twin_of(path).name}"
    assert en.levels, f"{path.relative_to(ROOT)} has no heading"
    assert len(en.levels) == len(es.levels), f"{where}: {len(en.levels)} headings vs {len(es.levels)}"
    assert en.levels == es.levels, f"{where}: heading levels differ"
    assert len(en.languages) == len(es.languages), f"{where}: {len(en.languages)} code blocks vs {len(es.languages)}"
    assert en.languages == es.languages, f"{where}: code block languages differ"
    assert cited_paths(en) == cited_paths(es), f"{where}: they cite different repository paths"
    assert en.shell == es.shell, f"{where}: their shell commands differ"
    assert en.excerpts == es.excerpts, f"{where}: their code excerpts differ"


@pytest.mark.parametrize("path", course_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_cited_paths_exist(path):
    for cited in sorted(cited_paths(parse(path))):
        file_part, _, test_name = cited.partition("::")
        target = ROOT / file_part.rstrip("/")
        assert target.exists(), f"{path.relative_to(ROOT)} cites `{cited}`, which does not exist"
        if test_name:
            source = target.read_text(encoding="utf-8")
            assert re.search(rf"^\s*def {re.escape(test_name)}\(", source, re.M), (
                f"{path.relative_to(ROOT)} cites `{cited}`: no such test in {file_part}"
            )


def excerpt_matches(code: str, source: str) -> bool:
    """Every non-blank line of `code` occurs in `source`, in order (indentation ignored; lines may be skipped
    in between, so an excerpt may leave out a docstring)."""
    wanted = [line.strip() for line in code.splitlines() if line.strip()]
    lines = iter(line.strip() for line in source.splitlines())
    return all(any(line == w for line in lines) for w in wanted)


@pytest.mark.parametrize("path", course_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_excerpts_are_the_code_they_quote(path):
    for source, code in parse(path).excerpts:
        target = ROOT / source
        assert target.is_file(), f"{path.relative_to(ROOT)} quotes {source}, which does not exist"
        assert code.strip(), f"{path.relative_to(ROOT)}: empty excerpt of {source}"
        assert excerpt_matches(code, target.read_text(encoding="utf-8")), (
            f"{path.relative_to(ROOT)}: an excerpt of {source} no longer matches the code:\n{code}"
        )


def _resolves(dotted: str) -> bool:
    """`minitrain.a.b.name`: the longest module prefix exists and mentions the first remaining name."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            if not rest:
                return True
            source = module.read_text(encoding="utf-8")
            return bool(
                re.search(
                    rf"^\s*(def|class) {re.escape(rest[0])}\b|^{re.escape(rest[0])}\b|"
                    rf"\bimport .*\b{re.escape(rest[0])}\b",
                    source,
                    re.M,
                )
            )
    return False


@pytest.mark.parametrize("path", course_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_cited_dotted_names_exist(path):
    for name in sorted(dotted_names(parse(path).prose)):
        assert _resolves(name), f"{path.relative_to(ROOT)} cites `{name}`, which is not in the package"


@pytest.mark.parametrize("path", course_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_relative_links_resolve(path):
    for link in LINK.findall(parse(path).prose):
        if re.match(r"^[a-z]+:", link) or link.startswith("#"):
            continue
        target = (path.parent / link.split("#")[0]).resolve()
        assert target.exists(), f"{path.relative_to(ROOT)} links to {link}, which does not exist"


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_index_lists_every_page_of_its_folder(folder):
    for index_name in ("README.md", "README.es.md"):
        index = (ROOT / folder / index_name).read_text(encoding="utf-8")
        linked = {Path(link.split("#")[0]).name for link in LINK.findall(index)}
        spanish = index_name.endswith(".es.md")
        pages = [p for p in (ROOT / folder).glob("*.md") if not p.name.startswith("README")]
        expected = {p.name for p in pages if p.name.endswith(".es.md") == spanish}
        assert expected <= linked, f"{folder}/{index_name} does not link {sorted(expected - linked)}"


def test_the_checks_can_fail(tmp_path):
    """A missing path, a missing test, a bad dotted name and a mismatched twin are all caught."""
    page = tmp_path / "x.md"
    page.write_text(
        "# A\n\nSee `minitrain/no_such_file.py`, `tests/autograd/test_tensor.py::test_not_there`, "
        "`minitrain.autograd.tensor.Nope` and `models/minigpt-phase18-<hash>.safetensors`.\n\n```bash\n"
        "# not a heading\n"
        "python scripts/nope.py --config 'experiments/x/config.yaml'\n```\n\n## B\n",
        encoding="utf-8",
    )
    parsed = parse(page)
    assert parsed.levels == [1, 2] and parsed.languages == ["bash"]
    assert cited_paths(parsed) == {
        "minitrain/no_such_file.py", "tests/autograd/test_tensor.py::test_not_there", "scripts/nope.py",
        "experiments/x/config.yaml",
    }  # fmt: skip
    assert not (ROOT / "minitrain/no_such_file.py").exists()
    assert not re.search(r"^\s*def test_not_there\(", (ROOT / "tests/autograd/test_tensor.py").read_text(), re.M)
    assert not _resolves("minitrain.autograd.tensor.Nope")
    assert _resolves("minitrain.autograd.tensor.Tensor") and _resolves("minitrain.autograd.gradcheck")
    page.write_text("# A\n\n<!-- excerpt: minitrain/autograd/tensor.py -->\n```python\nclass Tape:\n    x = 1\n```\n")
    ((source, code),) = parse(page).excerpts
    tape = (ROOT / source).read_text(encoding="utf-8")
    assert source == "minitrain/autograd/tensor.py" and not excerpt_matches(code, tape)
    assert excerpt_matches("class Tape:\n\n  def __init__(self) -> None:\n", tape)
    assert not excerpt_matches("def __init__(self) -> None:\nclass Tape:\n", tape)  # order matters
    twin = tmp_path / "x.es.md"
    twin.write_text("# A\n\n```bash\nls\n```\n", encoding="utf-8")
    assert twin_of(page) == twin and twin_of(twin) == page
    assert parse(twin).levels != parsed.levels


# Numbers quoted to 2+ decimals that are not committed results: each with the reason it is right.
CONSTANTS = {
    "0.95": "β2, a hyperparameter of lab 01's config",
    "0.02": "GPT-2's initial weight standard deviation",
    "0.05": "a 5 % tolerance; 1 − β2",
    "0.01": "an example gradient element (theory 02's exercise); a min_delta example",
    "4.16": "ln 64, the loss of a uniform guess over 64 ids",
    "0.044715": "the constant of GELU's tanh approximation",
    "1.65e-4": "WarmupCosine.lr_at(1050) for lab 01's schedule (the command beside it prints it)",
    "3.00002e-5": "WarmupCosine.lr_at(1999) for lab 01's schedule",
    "3.26": "0.01 · √106240, theory 02's exercise",
    "0.307": "1 / 3.26, theory 02's exercise",
    "1.12": "solutions/01: a variant run measured for the page (its command is on the page)",
    "0.127": "bits per weight of a double-quantized absmax: 8/64 + 32/(64·256) (minitrain/quant/blockwise.py)",
    "0.011": "1.4 / 127, the 8-bit scale of theory 07's exercise 2",
    "0.0055": "half of 1.4 / 127, the largest rounding move in theory 07's exercise 2",
    "7.2092": "lab 06: bpe-512's val_ppl_per_token as remade on the course machine, 2026-12-07 (the text says so)",
    "0.0002": "lab 09: the end-to-end item's tolerance on val PPL (minitrain/course/lab09.py)",
    "1.179": "lab 05: the 4-bit file's val PPL on the machine that first made its reference run (the text says so)",
}
SPANISH_NUMBER = re.compile(r"(?<![\w.,])(\d+),(\d{2,})(?!\w|,\d)")
NUMBER = re.compile(r"(?<![\w.])\d+\.\d{2,}(?:e-?\d+)?(?![\w.])")


def _numbers_in(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers_in(v)]
    return []


def committed_results() -> list[float]:
    """Every number of the committed runs, at any depth under experiments/ (lab 05's run folder and its merged
    model sit inside experiments/21-lora/): results.json, manifest.json, train_log.jsonl, report.md, and the
    evaluation a quantized model file records of itself."""
    import json

    from minitrain.runs.model_files import load_model_file

    found = []
    for folder in sorted(p for p in (ROOT / "experiments").rglob("*") if p.is_dir()):
        for name in ("results.json", "manifest.json", "scores.json"):  # scores.json: experiment 22 (lab 08)
            if (folder / name).is_file():
                found += _numbers_in(json.loads((folder / name).read_text(encoding="utf-8")))
        if (folder / "train_log.jsonl").is_file():
            for line in (folder / "train_log.jsonl").read_text(encoding="utf-8").splitlines():
                found += _numbers_in(json.loads(line))
        if (folder / "report.md").is_file():
            found += [float(n) for n in re.findall(r"\d+\.\d+", (folder / "report.md").read_text(encoding="utf-8"))]
        for model_file in sorted(folder.glob("*.safetensors")):
            if model_file.name == "adapter_model.safetensors":  # PEFT's layout (experiments/22): no minitrain metadata
                continue
            found += _numbers_in(load_model_file(model_file)[2].get("evaluation", {}))
    return found


def quotes(token: str, value: float) -> bool:
    """`token` (like 5.800) is `value` rounded to the token's decimals."""
    decimals = len(token.split(".")[1])
    return f"{value:.{decimals}f}" == token


@pytest.fixture(scope="module")
def results() -> dict[int, set[str]]:
    """The committed numbers as text, by decimals: {3: {"5.800", ...}, ...}."""
    values = committed_results()
    return {d: {f"{v:.{d}f}" for v in values} for d in range(2, 17)}


@pytest.mark.parametrize("path", course_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_quoted_number_is_a_committed_result(path, results):
    prose = parse(path).prose
    if path.name.endswith(".es.md"):  # Spanish prose writes the decimal comma: 63,47 is 63.47
        prose = SPANISH_NUMBER.sub(r"\1.\2", prose)
    wrong = [token for token in NUMBER.findall(prose) if token not in CONSTANTS
             and ("e" in token or token not in results[len(token.split(".")[1])])]
    assert not wrong, (f"{path.relative_to(ROOT)} quotes {sorted(set(wrong))}, which no committed results file holds "
                       "(as rounded); correct them, or list a constant with its reason in CONSTANTS")


def test_the_number_check_can_fail():
    assert quotes("5.800", 5.799501) and quotes("5.799501", 5.799501) and not quotes("5.799516", 5.799501)
    assert NUMBER.findall("val 5.799516 and 1.37, 8.2 s, step 350, 1e-4, v1.12.3") == ["5.799516", "1.37"]
    spanish = SPANISH_NUMBER.sub(r"\1.\2", "PPL 63,47 y 7,2092, los pasos 1, 2 y 3,4")
    assert NUMBER.findall(spanish) == ["63.47", "7.2092"]  # the decimal comma read, a list's commas not
    values = committed_results()
    assert any(quotes("5.799501", v) for v in values)  # the baseline's val_ppl
    assert not any(quotes("5.799516", v) for v in values)  # the number the course once quoted for it
    assert any(quotes("1.191", v) for v in values)  # lab 05: the 4-bit merged model's val PPL, in its file


def test_lab05_quotes_the_bytes_its_commands_give():
    """Lab 05's 4-bit file, made at labs/05/run, is the committed one with a shorter path (issue 49: the text
    quoted the committed file's 90,048 B where the lab's commands give 90,032 B)."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from lab05_table import bytes_at_the_labs_path, numbers, quoted_table

    assert numbers(quoted_table()["the 4-bit merged file: bytes, val PPL"])[0] == bytes_at_the_labs_path() == 90032
    spanish = (ROOT / "lab" / "05-lora-and-quantization.es.md").read_text(encoding="utf-8")
    assert "| 90 032, 1,191 |" in spanish and "90 048 bytes" not in spanish
