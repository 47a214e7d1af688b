"""The environment as a whole: OBLITERATUS picks cuda, and uv pip check is clean."""

from __future__ import annotations

from shlex import quote

from jetson_install.doctor.context import Context, uv_command
from jetson_install.doctor.results import FAIL, OK, Verdict
from jetson_install.tools.uv import accepted_note


def check_obliteratus(ctx: Context) -> Verdict:
    section = ctx.target_probe.section("obliteratus")
    install = ctx.reinstall_command()
    if section is None:
        return FAIL, ctx.torch.failure(), install
    if not section["imported"]:
        return FAIL, f"OBLITERATUS does not import: {section['error']}", install
    if section.get("error"):
        return FAIL, f"obliteratus.device.get_device('auto') failed: {section['error']}", install
    own = ctx.profile.obliteratus_device(section["device"], install)
    if own is not None:
        return own
    if section["device"] != "cuda":
        # OBLITERATUS only asks torch.cuda.is_available() (obliteratus/device.py,
        # https://github.com/elder-plinius/OBLITERATUS).
        return (
            FAIL,
            f"obliteratus.device.get_device('auto') answers {section['device']!r}, not 'cuda'",
            "make torch see the GPU first (see the cuda-available check)",
        )
    return OK, "OBLITERATUS imports; get_device('auto') answers 'cuda'", None


def check_pip(ctx: Context) -> Verdict:
    completed = ctx.pip_check
    if completed is None:
        return FAIL, "uv pip check did not run", f"uv pip check --python {quote(ctx.python)}"
    if completed.ok:
        note = accepted_note(completed)
        return OK, "uv pip check: no broken requirements" + (f" ({note})" if note else ""), None
    if completed.timed_out:
        return FAIL, "uv pip check could not run: it did not finish in time", f"{uv_command()} pip check --python {quote(ctx.python)}"
    if completed.returncode == 127:
        reason = completed.last_stderr_line() or "uv was not found"
        return FAIL, f"uv pip check could not run: {reason}", "install uv: pip install 'uv>=0.13'"
    problems = [
        line.strip()
        for line in (completed.stdout + "\n" + completed.stderr).splitlines()
        if line.strip() and not line.strip().startswith(("Checked", "Using", "Found"))
    ]
    first = problems[0] if problems else f"exit {completed.returncode}"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        FAIL,
        f"uv pip check: {first}{more}",
        f"run `uv pip check --python {quote(ctx.python)}` and install what it names with --no-deps,"
        " keeping the channel's torch (never let a resolver replace it)",
    )
