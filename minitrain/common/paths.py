"""Where minitrain's own checkout is: the committed experiments that a lab or a default reads (never writes).

    REPO_ROOT / "experiments" / ...       the reference runs a lab or a default reads
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
