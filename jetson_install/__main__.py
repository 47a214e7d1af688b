"""The process's start: `python -m jetson_install` and the `jetson-install` console script."""

import gc


def main() -> None:
    """Run this process's own command line."""
    # What the start-up allocates (the modules, their classes and functions, the command tree)
    # lives until the process exits, and a run makes little cyclic garbage: collecting while the
    # modules load would walk the same objects again and again, a measurable part of a no-op
    # re-run's CPU. `wheelhouse --serve`, the one command that runs until stopped, collects again.
    gc.disable()
    from jetson_install.cli.main import main as run

    run()


if __name__ == "__main__":
    main()
