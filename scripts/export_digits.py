"""Export scikit-learn's bundled copy of the UCI optical-recognition digits to data/digits/digits.csv, once.

    .venv/bin/python scripts/export_digits.py          (scikit-learn is a dev dependency; minitrain never needs it)

1,797 images of 8×8 pixels, each pixel an integer 0..16, and the digit drawn (0..9). The CSV has one row per
image in scikit-learn's order: columns pixel_0 .. pixel_63 (row-major: pixel_{8·r + c}) and label. The file is
committed, so no run downloads anything; this script documents where it came from and checks it still agrees.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "data" / "digits" / "digits.csv"


def digits_csv() -> str:
    from sklearn.datasets import load_digits

    digits = load_digits()
    header = [f"pixel_{i}" for i in range(digits.data.shape[1])] + ["label"]
    lines = [",".join(header)]
    for pixels, label in zip(digits.data.astype(int), digits.target, strict=True):
        lines.append(",".join(str(v) for v in pixels) + f",{int(label)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = digits_csv()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {text.count(chr(10)) - 1} rows, sha256 {hashlib.sha256(text.encode()).hexdigest()}")


if __name__ == "__main__":
    main()
