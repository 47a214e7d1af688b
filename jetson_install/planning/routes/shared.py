"""The steps every route shares, built from the plan: its environment, the target's install,
the protection, the checks, the doctor and the switch."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

from jetson_install.base import git_urls
from jetson_install.tools import uv
from jetson_install.base.layout import (
    COMPANIONS_INPUT,
    COMPANIONS_PYLOCK,
    CONSTRAINTS_FILE,
    EVIDENCE_FILE,
    MANIFEST_FILE,
    RECORD_FILE,
    REQUIREMENTS_FILE,
    STATE_DIR,
    VENDOR_INPUT,
    VENDOR_PYLOCK,
)
from jetson_install.planning.plan import Plan
from jetson_install.probes import (
    BOARD_PTXAS, additions_command, assembler_command, check_command, integrity_command, sealed_command,
    started_command,
)
from jetson_install.base.redact import credentials
from jetson_install.base.steps import Download, Step

__all__ = ["PROGRAM", "python_of", "state_of", "environment_step", "fetch_step", "left_to_uv", "target_lines",
           "target_requirements", "target_step",
           "libraries_step",
           "protect_step", "ptxas_variable", "assembler_probe",
           "check_step", "additions_commands", "verify_step", "switch_step"]

#: How the steps name this tool.
PROGRAM = "jetson-install"


def python_of(plan: Plan) -> str:
    return f"{plan.staging}/bin/python"


def state_of(plan: Plan) -> str:
    return f"{plan.staging}/{STATE_DIR}"


def environment_step(plan: Plan, interpreter: str, title: str, system_site_packages: bool = False,
                     seed: bool = True) -> Step:
    return Step("environment", "venv", title,
                (tuple(uv.venv_argv(interpreter, plan.staging, plan.settings.default_index.value,
                                    system_site_packages=system_site_packages, seed=seed)),))


def left_to_uv(plan: Plan) -> List[str]:
    """The vendor packages only uv can find the files of (a source the tool does not list: uv's
    default index), as uv is asked for them: by version, or by range."""
    vendor = plan.vendor
    if plan.resolution is not None:
        return [chosen.requirement() for chosen in plan.resolution.files if not chosen.url]
    if vendor is None or vendor.index is not None or vendor.wheels or plan.chosen_set is None:
        return []
    return plan.chosen_set.requirement_lines()


def fetch_step(plan: Plan, companions: bool = True) -> Step:
    """Before anything is installed, every vendor file (and, with `companions`, the runtime wheels
    the channel names) is downloaded into the per-user cache of checked wheels (or taken from
    it), checked against its sha256 (the catalog's, the index's, the lock's, or the one uv
    resolved it with) and against its own RECORD, and every file's sha256 kept in
    vendor-files.json: the doctor's expected hashes come from the artifact, never from the
    environment. What only uv can list is resolved by uv first, as pylock.toml (each file's URL
    and sha256); the files a plan already knows are listed as its downloads."""
    vendor = plan.vendor
    assert vendor is not None
    python, state, default_index = python_of(plan), state_of(plan), plan.settings.default_index.value
    commands: List[Tuple[str, ...]] = []
    said: List[str] = []
    asked = left_to_uv(plan)
    if asked:
        commands.append(tuple(uv.files_compile_argv(python, f"{state}/{VENDOR_INPUT}", f"{state}/{VENDOR_PYLOCK}",
                                                    default_index, no_deps=True)))
        said.append(f"resolve {', '.join(asked)} on {vendor.location} (uv writes each file's URL and sha256)")
    if companions and vendor.companions:
        commands.append(tuple(uv.files_compile_argv(python, f"{state}/{COMPANIONS_INPUT}", f"{state}/{COMPANIONS_PYLOCK}",
                                                    default_index, no_deps=False)))
        said.append("resolve the runtime wheels the vendor builds need "
                    f"({', '.join(map(vendor.companion_shown, vendor.companions))}) on the default index, by name")
    if plan.resolution is not None:
        downloads = tuple(Download(chosen.url, chosen.sha256) for chosen in plan.resolution.files if chosen.url)
    else:
        known = {build.file: build.sha256 for build in vendor.builds}
        downloads = tuple(Download(url, known.get(url.rsplit("/", 1)[-1])) for url in vendor.wheels)
    unlisted = plan.resolution is None and vendor.index is not None
    files = ("the files the vendor index resolves to (`plan --resolve` lists them)" if unlisted
             else "each file")
    said.append(f"download {files} into the cache of checked wheels (or take it from there), check its sha256 "
                f"and its own RECORD, and keep every file's sha256 in {MANIFEST_FILE}")
    return Step("fetch", "fetch", "; ".join(said), tuple(commands), downloads=downloads)


def target_lines(plan: Plan) -> List[str]:
    """The target and the vendor packages its set pins exactly: those are asked for again
    (NVIDIA's pre-release torch would not meet a dependency's `torch>=2.5` otherwise); a range
    is pinned by the constraints alone. A git URL comes without its credentials: uv would put
    them on its git's command line; its git gets them from its environment (Plan.sources)."""
    exact = plan.chosen_set.pins if plan.chosen_set is not None else plan.pins
    return [git_urls.requirement_without_credentials(line) for line in plan.sources] + \
        [f"{name}=={version}" for name, version in plan.pins.items() if name in exact]


def target_requirements(plan: Plan) -> Tuple[str, ...]:
    """What the target step gives uv: an archive URL with a token (which uv itself fetches)
    goes to uv in a file only the user can read (the target step writes it), never on its
    command line."""
    lines = target_lines(plan)
    if any(credentials(line.split(" @ ", 1)[-1]) for line in lines):
        return ("--requirement", f"{state_of(plan)}/{REQUIREMENTS_FILE}")
    return tuple(lines)


def target_step(plan: Plan) -> Step:
    """The target, --with's additions and the vendor builds' own dependencies (the vendor step
    took the builds alone), from the default index under the vendor constraints."""
    what = [f"{plan.target.title} from its source"] if plan.requirement else []
    what += list(plan.additions) or ([] if what else ["the vendor builds' dependencies"])
    listed = " and ".join(what) if len(what) < 3 else f"{', '.join(what[:-1])} and {what[-1]}"
    return Step("target", "target", f"install {listed} under the vendor constraints",
                (tuple(uv.target_install_argv(python_of(plan), target_requirements(plan),
                                              f"{state_of(plan)}/{CONSTRAINTS_FILE}",
                                              plan.settings.default_index.value)),))


def libraries_step(plan: Plan) -> Step:
    """Before the target, the vendor builds' .so files must find what the channel records a
    provider for (a companion within its bound, an apt package): a missing one fails here,
    before anything else is installed or switched. Their declared dependencies come with the
    target step; the verify step's doctor then checks every library they link."""
    assert plan.vendor is not None
    sonames = ", ".join(dict.fromkeys(library.soname for library in plan.vendor.libraries))
    return Step("libraries", "libraries", f"check that the vendor builds' libraries find {sonames} where the loader "
                                          "looks, before the rest is installed",
                equivalent=(PROGRAM, "doctor", "--venv", plan.venv, "--check", "libraries", *plan.doctor_platform_args))


def assembler_probe(plan: Plan) -> Optional[Tuple[str, ...]]:
    """The assembler probe for the board's GPU (the board's own ptxas tried beside Triton's),
    where the platform names a compute capability; the doctor runs the same command line."""
    platform = plan.platform
    if not platform.compute_capability:
        return None
    return assembler_command(python_of(plan), platform.compute_capability, platform.board_root)


def ptxas_variable(compute_capability: str) -> str:
    """The variable that names Triton's assembler for a GPU: its Blackwell one serves compute
    capability 10.0 and up (triton/backends/nvidia/compiler.py, get_ptxas)."""
    return "TRITON_PTXAS_BLACKWELL_PATH" if int(compute_capability.split(".")[0]) >= 10 else "TRITON_PTXAS_PATH"


def protect_step(plan: Plan, title: str) -> Step:
    """On a board, the protection also points Triton at the board's assembler where Triton's own
    cannot assemble for the GPU and the board's can (pytorch/pytorch#170117): the assembler probe
    decides, once the environment holds its Triton."""
    probe = assembler_probe(plan) if plan.route.profile.gpu else None
    capability, root = plan.platform.compute_capability, plan.platform.board_root
    if probe is None or capability is None or root is None:
        return Step("protect", "protect", title)
    board = Path(root) / BOARD_PTXAS
    return Step("protect", "protect", f"{title}; and {ptxas_variable(capability)} there, naming {board}, where the environment's "
                                      f"Triton cannot assemble for compute capability {capability} and that one can",
                (probe,))


def check_step(plan: Plan, title: str) -> Step:
    """uv pip check and the target's own smoke command (it must import, even where no GPU is
    visible), which run side by side: both only read the environment. Then what the user put on
    the stack: each addition's top-level modules imported (the additions probe), and each
    --check-command."""
    python = python_of(plan)
    smoke = tuple(python if part == "python" else part for part in plan.target.smoke)
    return Step("check", "check", title, (tuple(uv.pip_check_argv(python)), smoke, *additions_commands(plan, python)))


def additions_commands(plan: Plan, python: str) -> List[Tuple[str, ...]]:
    """The additions probe (where --with gave any) and each --check-command, `python` in one
    standing for the environment's interpreter: what the check step and the doctor run."""
    commands: List[Tuple[str, ...]] = []
    if plan.additions:
        commands.append(additions_command(python, plan.additions))
    commands += [check_command(python, command) for command in plan.check_commands]
    return commands


def verify_step(plan: Plan, title: str) -> Step:
    """The doctor on the new environment, keeping its evidence in the environment; with
    --no-verify only the checks that need no GPU. It runs in the install's process, which
    already holds the platform and the catalog: its commands are the probes it starts, in two
    phases (docs/doctor.md): the sealed proof (the torch probe sealed, the integrity probe,
    which judges what ran in it, and with a full doctor the bitsandbytes probe sealed), then,
    once that has ended, what runs the environment's own code (the torch probe as the user's
    python starts it; with a full doctor the bitsandbytes probe so too, uv pip check, which
    asks the interpreter what it is, and the assembler probe where the platform names a compute
    capability; the additions probe and --check-command's where given). With --no-verify only the checks that need no GPU:
    python-abi, libraries, startup-hooks, vendor-files, loaded-files, torch-import, torch-build
    and additions; the integrity probe compares the vendor files by size, as any doctor but the
    strict one does. The command that does the same later is `jetson-install doctor` on DIR."""
    python = python_of(plan)
    # The vendor step's record names the vendor builds and companions; a kept stack has none.
    record = f"{state_of(plan)}/{RECORD_FILE}" if plan.route.resolves() else None
    manifest = f"{state_of(plan)}/{MANIFEST_FILE}"
    # With --no-verify no check reads OBLITERATUS or transformers: the torch probe leaves them out.
    sealed: List[Tuple[str, ...]] = [sealed_command(python, "torch")]
    started: List[Tuple[str, ...]] = [started_command(python, "torch", target=plan.verify)]
    if plan.verify:
        sealed.append(sealed_command(python, "bitsandbytes"))
        started += [started_command(python, "bitsandbytes"), tuple(uv.pip_check_argv(python))]
        assembler = assembler_probe(plan)
        if assembler is not None:  # the compile check's half that needs no GPU
            started.append(assembler)
    sealed.append(integrity_command(python, record, False, manifest, ran=True))
    commands = [*sealed, *started, *additions_commands(plan, python)]
    options = (*plan.doctor_platform_args, *plan.route.profile.options,
               *(() if plan.verify else ("--no-gpu",)))
    equivalent = (PROGRAM, "doctor", "--venv", plan.venv, "--evidence", f"{plan.venv}/{STATE_DIR}/{EVIDENCE_FILE}",
                  *options)
    return Step("verify", "doctor", title, tuple(commands), equivalent)


def switch_step(plan: Plan) -> Step:
    return Step("switch", "switch", f"switch {plan.venv} to the new environment in one atomic rename, keeping the "
                                    "one it replaces for rollback and removing older ones")
