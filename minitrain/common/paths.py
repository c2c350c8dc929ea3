"""Where minitrain's own checkout is: the committed experiments and models that defaults point at.

    REPO_ROOT / "models"                  the committed models (artifacts.DEFAULT_MODELS_DIR)
    REPO_ROOT / "experiments" / ...       the reference runs a lab or a default reads
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
