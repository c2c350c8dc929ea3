"""Lab 05's quoted numbers are what its own commands give here (issue 28, item 3).

test_lab_commands runs the lab's commands as printed (`run.py --base-only`, the LoRA training, `minitrain
merge-adapters`, `minitrain quantize`, ...) and hands the run folder they made to `check_reference_table`: every row
of the lab's "reference run" table holds within the tolerances the text states (another CPU may round the base's
products differently); when the base came out bit-identical to the one the reference run names, the LoRA run must be
bit-identical to the reference run too (`check_bit_identity`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from safetensors import safe_open

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "experiments" / "21-lora" / "lab05"


def quoted_table() -> dict[str, str]:
    """{first cell: second cell} of the lab text's "The reference run" table."""
    text = (REPO / "lab" / "05-lora-and-quantization.md").read_text(encoding="utf-8")
    section = text.split("## The reference run", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): cells[1].strip() for cells in rows[1:]}


def numbers(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", cell)]


def check_reference_table(student: Path) -> None:
    """`student`: the lab's run folder (labs/05/run) made by the lab's own commands."""
    table = quoted_table()
    results = json.loads((student / "results.json").read_text())
    manifest = json.loads((student / "manifest.json").read_text())
    trainable, total, share = numbers(table["`trainable_parameters`, `parameters`"])
    assert (manifest["trainable_parameters"], manifest["parameters"]) == (trainable, total)
    assert round(manifest["trainable_share"], 6) == share
    val_ppl, exact = numbers(table["`val_ppl`, `val_exact_match` on the held-out imperfect"])
    assert results["val_ppl"] == pytest.approx(val_ppl, rel=0.005)
    assert abs(100 * results["val_exact_match"] - exact) <= 100 / 24 + 0.05  # one form of the 24
    (dev_ppl,) = numbers(table["`dev_ppl` (the dev verbs' imperfect, on which lr was chosen)"])
    assert results["dev_ppl"] == pytest.approx(dev_ppl, rel=0.005)
    file_bytes, int4_ppl = numbers(table["the 4-bit merged file: bytes, val PPL"])
    int4 = student / "merged-int4.safetensors"
    with safe_open(int4, framework="numpy") as file:
        evaluation = json.loads(file.metadata()["evaluation"])
    assert int4.stat().st_size == pytest.approx(file_bytes, abs=8)  # a header's padding; the path is the lab's
    assert evaluation["val_ppl"] == pytest.approx(int4_ppl, rel=0.02)
    assert evaluation["val_exact_match"] == pytest.approx(results["val_exact_match"], abs=1 / 24 + 1e-9)


def check_bit_identity(student: Path) -> None:
    """The reference run names no machine's path; a base that came out with the reference's own file name
    (its hash) gives the reference run byte for byte."""
    reference = json.loads((REFERENCE / "manifest.json").read_text())
    ours = json.loads((student / "manifest.json").read_text())
    assert Path(reference["init_from"]).parts[:3] == ("runs", "21-lora", "base")  # no machine's absolute path
    if Path(ours["init_from"]).name != Path(reference["init_from"]).name:
        return  # this CPU trained another base (lab 01 says why): the table's tolerances apply
    reference_log = (REFERENCE / "train_log.jsonl").read_text()
    assert (student / "train_log.jsonl").read_text() == reference_log
    assert ours["config_hash"] == reference["config_hash"]


def bytes_at_the_labs_path() -> int:
    """The committed 4-bit file's size with the source path it records rewritten to the lab's (labs/05/run): the
    safetensors header is JSON padded to a multiple of 8 bytes."""
    data = (REFERENCE / "merged-int4.safetensors").read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + n].rstrip(b" ").replace(b"experiments/21-lora/lab05/merged", b"labs/05/run/merged")
    return 8 + -(-len(header) // 8) * 8 + len(data) - 8 - n
