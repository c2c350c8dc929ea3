"""Phase 14: fit, tune (on dev) and score the character n-gram baseline; write results.json and README.md.

    python scripts/ngram_baseline.py --config experiments/14-ngram-baseline/config.yaml \
        --out-dir experiments/14-ngram-baseline/

A thin wrapper around `minitrain.ngram.baseline`. The outputs are deterministic; the wall-clock time of the run is
printed, not written, so a rerun reproduces the files byte for byte.
"""

from __future__ import annotations

import argparse
import sys

from minitrain.common.errors import UserError
from minitrain.ngram.baseline import load_baseline_config, run_baseline, write_outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="YAML config (see experiments/14-ngram-baseline/)")
    parser.add_argument("--out-dir", required=True, help="folder for results.json and README.md")
    args = parser.parse_args(argv)
    try:
        cfg = load_baseline_config(args.config)
        results, seconds = run_baseline(cfg)
        write_outputs(results, cfg, args.out_dir)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    ak = results["add_k_reference"]
    print(
        f"Kneser-Ney order {results['order']}, discount scale {results['discount_scale']} (chosen on dev): "
        f"PPL train {results['train_ppl']:.3f}, dev {results['dev_ppl']:.3f}, val {results['val_ppl']:.3f}; "
        f"val exact match {results['val_exact_match']:.1%}\n"
        f"add-k order {ak['order']}, k {ak['k']}: PPL val {ak['val_ppl']:.3f}\n"
        f"seconds: " + ", ".join(f"{stage} {s:.2f}" for stage, s in seconds.items())
        + f" (total {sum(seconds.values()):.2f}); wrote {args.out_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
