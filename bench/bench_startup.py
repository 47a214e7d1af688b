"""How long `jetson-install --help`, `--version`, `detect` and `plan` take, as ratios to
`python -c pass` in the same run, and `--help` against a bare click app's `--help`.

Goal (issue 31): `--help` at most 1.5x a bare click app's `--help`, in instructions (click's floor:
what any command-line tool built on click pays before it does anything). Two floors are measured:
a click group with one command, and a bare app with the tool's own command-line surface (its
commands, subcommands and parameters, generated from the tool's click group, with no callbacks and
no imports of the tool): what click alone costs for these 19 commands. The commands run as a user runs them, through the
`jetson-install` script installed beside this interpreter (`python -m jetson_install` where
there is none, which adds runpy). Beside the wall and CPU seconds, the instructions each case
executes (valgrind's callgrind, where valgrind is installed): the same on every run of the same
code, whatever else the machine is doing. Run by hand: python bench/bench_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple


def seconds(argv: Sequence[str]) -> Tuple[float, float]:
    """Wall seconds, and the CPU seconds the process used (user + system): on a machine shared
    with other work the CPU time moves far less than the wall time does."""
    start, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime


def instructions(argv: Sequence[str]) -> Optional[int]:
    """Instructions executed by `argv` and every process it starts (callgrind's totals); None
    without valgrind. One run is enough: the count does not move with the machine's load."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as folder:
        subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                        f"--callgrind-out-file={folder}/callgrind.%p", *argv],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return sum(int(line.split()[1]) for path in Path(folder).iterdir()
                   for line in path.read_text().splitlines() if line.startswith("totals:"))


# The floor: a click group with one command, nothing else imported.
BARE_CLICK_APP = """import click


@click.group()
def cli() -> None:
    \"\"\"A bare click app.\"\"\"


@cli.command()
def one() -> None:
    \"\"\"Its one command.\"\"\"


cli()
"""


def same_surface_app() -> str:
    """A standalone click app with the tool's commands and parameters and nothing else."""
    import click

    from jetson_install.cli.main import cli

    def params(command: click.Command) -> List[str]:
        lines = []
        for param in command.params:
            if isinstance(param, click.Argument):
                lines.append(f"@click.argument({param.name!r}, nargs={param.nargs}, required={param.required})")
            elif isinstance(param, click.Option):
                kind = "is_flag=True, " if param.is_flag else ""
                lines.append(f"@click.option(*{list(param.opts)!r}, {kind}multiple={param.multiple}, help={param.help!r})")
        return lines

    def emit(group: click.Group, parent: str, out: List[str]) -> None:
        context = click.Context(group)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            if command is None:
                continue
            function = "c_" + str(len(out))
            kind = "group" if isinstance(command, click.Group) else "command"
            out += [f"@{parent}.{kind}({name!r}, help={command.help!r})", *params(command),
                    f"def {function}(**given):", "    pass", ""]
            if isinstance(command, click.Group):
                emit(command, function, out)

    out = ["import click", "", f"@click.group(help={cli.help!r}, context_settings={cli.context_settings!r})",
           *params(cli), "def cli(**given):",
           "    pass", ""]
    emit(cli, "cli", out)
    return "\n".join(out + ["cli()", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    # An installed wheel carries compiled bytecode; an editable checkout under
    # PYTHONDONTWRITEBYTECODE would recompile every module on every run instead.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parent.parent / "jetson_install")],
                   check=True)
    script = Path(sys.executable).parent / "jetson-install"
    tool = [str(script)] if script.exists() else [sys.executable, "-m", "jetson_install"]
    sample = ["--root", "sample:agx-orin-64gb-jp6.2"]
    bare_app = Path(tempfile.mkdtemp(prefix="bench-startup-")) / "bare_click_app.py"
    bare_app.write_text(BARE_CLICK_APP)
    same_surface = bare_app.parent / "same_surface_app.py"
    same_surface.write_text(same_surface_app())
    cases = {
        "import click (reference)": [sys.executable, "-c", "import click"],
        "bare click app --help": [sys.executable, str(bare_app), "--help"],
        "same-surface app --help": [sys.executable, str(same_surface), "--help"],
        "--help": tool + ["--help"],
        "--version": tool + ["--version"],
        "detect (sample root)": tool + ["detect"] + sample,
        "plan (sample root)": tool + ["plan", "obliteratus"] + sample,
    }
    baseline = [sys.executable, "-c", "pass"]
    for argv in [baseline, *cases.values()]:
        seconds(argv)  # warm-up: disk caches favour no case
    # Interleaved, one sample of each case a round: a busy moment on a shared machine hits all alike.
    samples: Dict[str, List[Tuple[float, float]]] = {name: [] for name in ["python -c pass", *cases]}
    for _ in range(args.repeat):
        for name, argv in [("python -c pass", baseline), *cases.items()]:
            samples[name].append(seconds(argv))
    wall, cpu = ({name: statistics.median(sample[n] for sample in taken) for name, taken in samples.items()}
                 for n in (0, 1))
    print(f"baseline python -c pass: {wall['python -c pass'] * 1000:.1f} ms wall, {cpu['python -c pass'] * 1000:.1f} ms "
          f"CPU (medians of {args.repeat}, interleaved); load average {os.getloadavg()[0]:.1f}")
    counted = {name: instructions(argv) for name, argv in [("python -c pass", baseline), *cases.items()]}
    base = counted["python -c pass"]
    if base is None:
        print("no valgrind here: no instruction counts (apt-get install valgrind)")
    else:
        print(f"baseline python -c pass: {base / 1e6:.1f} M instructions (callgrind)")
    # click is a dependency every command parses with: what the tool adds is what lies above it.
    for name in cases:
        count = counted[name]
        print(f"{name:24} {wall[name] * 1000:7.1f} ms  {wall[name] / wall['python -c pass']:5.2f}x wall  "
              f"{cpu[name] / cpu['python -c pass']:5.2f}x CPU  "
              + (f"{count / base:5.2f}x instructions ({count / 1e6:6.1f} M)  " if count and base else "")
              + f"{(wall[name] - wall['import click (reference)']) * 1000:+6.1f} ms over import click")
    help_count, bare_count = counted["--help"], counted["bare click app --help"]
    if help_count and bare_count:
        print(f"--help vs a bare click app's --help: {help_count / bare_count:.2f}x instructions (goal at most 1.5x)")
    surface_count = counted["same-surface app --help"]
    if help_count and surface_count:
        print(f"--help vs a bare app with the tool's commands and options: {help_count / surface_count:.2f}x instructions")
    shutil.rmtree(bare_app.parent)


if __name__ == "__main__":
    main()
