import os
from pathlib import Path

from support.fixtures import *  # noqa: F401,F403

# tests/setup.d/10-real-torch-env builds this where torch 2.13.0 (CPU) installs without a download.
_REAL_TORCH_PYTHON = Path(__file__).resolve().parent.parent / ".venv-real-torch" / "bin" / "python"
if _REAL_TORCH_PYTHON.exists():
    os.environ.setdefault("JETSON_INSTALL_REAL_TORCH_PYTHON", str(_REAL_TORCH_PYTHON))
