"""`doctor`, `evidence check|table` and `labels`: the doctor on an environment, and its
evidence read back as an input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.base.layout import EVIDENCE_FILE, STATE_DIR
from jetson_install.base.outputs import check_output, write_output
from jetson_install.board.root_facts import COMPATIBLE
from jetson_install.cli.commands.given import PlatformOptions, given_platform, venv_path
from jetson_install.cli.commands.lifecycle import default_environment, default_venv
from jetson_install.cli.commands.platform import detect_platform, platform_and_channel
from jetson_install.doctor import GPU_FREE_CHECKS
from jetson_install.doctor.on_environment import DoctorRun, doctor_environment
from jetson_install.fleet.evidence import (
    DEFAULT_MAX_AGE_DAYS, NotEvidence, Verdict, gate_record_text, judge, load, parse_requirement,
)
from jetson_install.fleet.labels import RunnerLabels, runner_labels

if TYPE_CHECKING:
    from jetson_install.planning.rerun import Rerun

__all__ = ["doctor_interpreter", "doctor", "judged", "tabulated", "labels"]


def doctor_interpreter(venv: Optional[str], python: Optional[str]) -> Tuple[str, Optional[str]]:
    """The interpreter `doctor` checks: --python, else the environment's (--venv, else the default
    one that exists), and a note naming the default it took."""
    if venv and python:
        raise BadInput("--venv and --python were both given", fix="pass only one of them")
    if python:
        return python, None
    link, note = (venv_path(venv), None) if venv is not None else default_environment("doctor")
    interpreter = link / "bin" / "python"
    if not interpreter.exists():
        raise BadInput(f"no environment at {link}",
                       fix="pass --venv DIR or --python PATH, or install first: jetson-install obliteratus (or "
                           "jetson-install torch, the stack alone)")
    return str(interpreter), note


def doctor(python: str, options: PlatformOptions, only: Sequence[str], strict: bool, no_gpu: bool, preflight: bool,
           evidence_file: Optional[str], gate_file: Optional[str], progress: Callable[[str], None]) -> DoctorRun:
    """The doctor on the environment of `python`, on the platform the options give, judged
    against what it was made with; its evidence (and the gate record) written where asked."""
    for option, path in (("--evidence", evidence_file), ("--gate-evidence", gate_file)):
        if path:
            check_output(option, path)
    if no_gpu and (only or strict):
        raise BadInput("--no-gpu selects the checks that need no GPU; --check and --strict select others",
                       fix="drop --no-gpu, or drop --check/--strict")
    platform, channel = platform_and_channel(options)
    run = doctor_environment(python, platform, channel, only=GPU_FREE_CHECKS if no_gpu else only, strict=strict,
                             preflight=preflight, evidence_file=evidence_file, progress=progress, install_command=None,
                             platform_options=given_platform(options))
    if gate_file:
        write_output("--gate-evidence", gate_file, gate_record_text(run.evidence, run.report.exit_code, os.environ))
    return run


def judged(files: Sequence[str], max_age: Optional[float], requirements: Sequence[str] = (),
           partial: bool = False) -> List[Verdict]:
    """Each evidence file judged (`partial`: evidence that does not prove CUDA passes too);
    every file is read first: an unreadable one is bad input (exit 2), before any verdict."""
    wanted = [parse_requirement(text) for text in requirements]
    loaded = [(path, load(path)) for path in files]
    age = DEFAULT_MAX_AGE_DAYS if max_age is None else max_age
    return [judge(path, data, max_age_days=age, requirements=wanted, partial=partial) for path, data in loaded]


def tabulated(files: Sequence[str], max_age: Optional[float]) -> List[Verdict]:
    """`evidence table`'s verdicts: as `judged`'s, but a file that holds no evidence (a stray
    file in the folder the table is made from) is one not counted, with its reason, instead of
    no table at all; a file that cannot be read at all is still bad input."""
    age = DEFAULT_MAX_AGE_DAYS if max_age is None else max_age
    verdicts = []
    for path in files:
        try:
            data = load(path)
        except NotEvidence as exc:
            verdicts.append(Verdict(path, False, f"not evidence: {exc.problem}", {}))
            continue
        verdicts.append(judge(path, data, max_age_days=age))
    return verdicts


def labels(options: PlatformOptions, evidence_file: Optional[str], max_age: Optional[float],
           environment: Optional[Path], typed: Rerun) -> RunnerLabels:
    """The runner labels for this board; `cuda` only with evidence that proves it (by default
    that of `environment`, the default one that exists). Labels name the hardware a job lands
    on: a --soc the device tree contradicts is refused (`detect` and a plan only warn)."""
    platform = detect_platform(options)
    soc = options.soc
    if soc.value is not None and platform.soc_read is not None and platform.soc_read != platform.soc:
        fix = f"drop --soc: {typed.without('--soc')}" if soc.source == "--soc" else f"unset {soc.source}"
        raise BadInput(f"labels: {soc.source} {platform.soc} contradicts the device tree, which names "
                       f"{platform.soc_read} ({COMPATIBLE}); a runner's labels name the hardware it is", fix=fix)
    if evidence_file is not None:
        return runner_labels(platform, judged((evidence_file,), max_age)[0])
    own = (environment or default_venv("obliteratus")) / STATE_DIR / EVIDENCE_FILE
    if not own.exists():
        return runner_labels(platform, None)
    try:
        verdict = judged((str(own),), max_age)[0]
    except BadInput as exc:
        # The environment's own evidence, broken: the labels still come, without `cuda`.
        verdict = Verdict(str(own), False, exc.message.split(": ", 1)[-1], {})
    return runner_labels(platform, verdict)
