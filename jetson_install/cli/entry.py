"""The `jetson-install` console script and `python -m jetson_install`.

`--version` alone is answered here, without loading click (a bare `import click` takes about
four times what `python -c pass` does); every other command line goes to `cli.main`.
"""

from __future__ import annotations

import gc
import sys

from jetson_install import __version__

#: typing itself costs `--version` as much again as Python's start-up: its names are for the
#: type checkers only (which read this name as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

#: What click's version option prints for `jetson-install --version` (cli.py's `version_option`).
VERSION_LINE = f"jetson-install, version {__version__}"


def main(argv: Optional[List[str]] = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        print(VERSION_LINE)
        sys.exit(0)
    from jetson_install.cli.main import main as run_cli

    try:
        run_cli(args)
    finally:
        # What the run made is freed with the process: at exit, Python's last garbage
        # collections would walk every object first, about 30 ms of CPU once an install's
        # modules are loaded (2-3 ms after `python -c pass`).
        gc.freeze()
