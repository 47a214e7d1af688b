"""The probes, run by the target interpreter, and the Context every check reads."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence, Set, Tuple

from packaging.specifiers import InvalidSpecifier
from packaging.version import InvalidVersion

from jetson_install.base.layout import COMPLETE_MARK, STATE_DIR
from jetson_install.base.versions import satisfies
from jetson_install.board.platform_data import platform_data
from jetson_install.doctor.profiles import JETSON, Profile
from jetson_install.envs.interpreters import served_interpreter
from jetson_install.envs.known_dirs import default_venv
from jetson_install.envs.record import read_record
from jetson_install.envs.sonames import site_packages_of
from jetson_install.planning.fixes import python_install
from jetson_install.probes import probe_command, sealed_command, started_command
from jetson_install.tools import runner

if TYPE_CHECKING:
    from jetson_install.board.platform import Platform
    from jetson_install.catalog.catalog import Channel, VendorSource


def uv_command() -> str:
    """uv as a fix should spell it: the binary jetson-install ships (a pipx install keeps it
    off PATH), or plain `uv` where that cannot be found."""
    try:
        from uv import find_uv_bin

        return shlex.quote(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return "uv"


@dataclass(frozen=True)
class ProbeOutcome:
    """The last JSON line a probe printed, and how its process ended."""

    name: str
    data: Mapping[str, Any]
    completed: Optional[runner.Completed]  # None: the probe was not needed for the selected checks
    # The launcher's account of every file that ran in it (probes/launch.py), for the probes
    # that decide `cuda`; empty where it never got that far.
    files: Mapping[str, Any] = field(default_factory=dict)

    def section(self, key: str) -> Optional[Mapping[str, Any]]:
        """A section the probe finished writing, or None when it never got there or died in it."""
        value = self.data.get(key)
        if isinstance(value, dict) and value.get("done", True):
            return value
        return None

    def failure(self) -> str:
        """Why the probe's findings are missing, ending with its last stderr line."""
        completed = self.completed
        if completed is None:
            return f"the {self.name} probe did not run"
        last = completed.last_stderr_line() or "no output on stderr"
        if completed.timed_out:
            return f"the {self.name} probe timed out: {last}"
        if completed.returncode != 0:
            return f"the {self.name} probe exited {completed.returncode}: {last}"
        return f"the {self.name} probe printed no findings: {last}"


#: A probe still busy after this long says what it waits for: importing torch takes
#: seconds on a Jetson and over a minute under emulation, long enough to look hung.
SLOW_PROBE_SECONDS = 2.0
# What a probe is doing while a section of its report is marked "done": false.
_PROBE_STEPS = {
    "python": "starting Python",
    "numpy": "importing numpy",
    "torch": "importing torch",
    "cuda": "starting CUDA through torch",
    "matmul": "running a CUDA matmul",
    "obliteratus": "importing obliteratus",
    "compile": "compiling a function with torch.compile",
}
_PROBE_START = {"torch": "starting Python", "bitsandbytes": "importing torch and bitsandbytes",
                "additions": "importing what was added to the stack",
                "integrity": "checking the vendor files against their RECORDs",
                "assembler": "assembling a kernel with Triton's assembler"}


class _ProbeWatch:
    """Follows a probe's report lines; tells `progress` what it waits for once that has lasted a while."""

    def __init__(self, name: str, python: str, progress: Callable[[str], None]) -> None:
        self.python = python
        self.progress = progress
        self.doing = _PROBE_START.get(name, f"running the {name} probe")
        self.since = time.monotonic()
        self.told: Set[str] = set()

    def line(self, stream: str, text: str) -> None:
        if stream != "stdout" or not text.startswith("{"):
            return
        try:
            report = json.loads(text)
        except ValueError:
            return
        doing = _unfinished(report) if isinstance(report, dict) else None
        if doing and doing != self.doing:
            self.doing, self.since = doing, time.monotonic()

    def tick(self) -> None:
        if self.doing not in self.told and time.monotonic() - self.since >= SLOW_PROBE_SECONDS:
            self.told.add(self.doing)
            self.progress(f"{self.doing} in {self.python} ...")


def _unfinished(report: Mapping[str, Any]) -> Optional[str]:
    """The step a probe's report line says is under way, in words."""
    for key, value in report.items():
        if isinstance(value, dict) and value.get("done") is False:
            return _PROBE_STEPS.get(key, f"probing {key}")
    kernels = report.get("kernels")
    if isinstance(kernels, dict):
        for kernel, value in kernels.items():
            if isinstance(value, dict) and value.get("done") is False:
                return f"running the bitsandbytes {kernel} kernel test"
    return None


def _run_probe(python: str, name: str, timeout: float,
               progress: Optional[Callable[[str], None]] = None,
               command: Optional[Sequence[str]] = None,
               env: Optional[Mapping[str, str]] = None,
               cancel: Optional[threading.Event] = None, input_text: Optional[str] = None) -> ProbeOutcome:
    """`command`: the probe's own command line, where it takes arguments (the integrity
    probe's); `env`: what the environment's activate scripts export that the probe must see;
    `cancel`: set when the run is interrupted (runner.end_children), the probe is not started;
    `input_text`: what it reads on its stdin (the integrity probe: what ran in the sealed proof)."""
    watch = _ProbeWatch(name, python, progress) if progress is not None else None
    completed = runner.run(command or probe_command(python, name), timeout=timeout, env=env, input_text=input_text,
                           on_line=watch.line if watch else None, on_tick=watch.tick if watch else None,
                           own_group=True, cancel=cancel)
    return ProbeOutcome(name, _last_json_object(completed.stdout, name), completed)


def _run_sealed(python: str, name: str, pycache: str, timeout: float,
                progress: Optional[Callable[[str], None]] = None, env: Optional[Mapping[str, str]] = None,
                cancel: Optional[threading.Event] = None) -> ProbeOutcome:
    """`name` sealed (probes.sealed_command), with no PYTHON* variable and `pycache`, the
    run's fresh, empty pycache folder (made by run_doctor, shared by its sealed probes)."""
    watch = _ProbeWatch(name, python, progress) if progress is not None else None
    completed = runner.run(sealed_command(python, name, pycache), timeout=timeout, env=env,
                           unset=[variable for variable in os.environ if variable.startswith("PYTHON")]
                           + ["PYTHONIOENCODING"],
                           on_line=watch.line if watch else None, on_tick=watch.tick if watch else None,
                           own_group=True, cancel=cancel)
    return ProbeOutcome(name, _last_json_object(completed.stdout, name), completed,
                        _last_json_object(completed.stdout, "files"))


def _run_started(python: str, name: str, timeout: float, target: bool = True,
                 env: Optional[Mapping[str, str]] = None, cancel: Optional[threading.Event] = None) -> ProbeOutcome:
    """`name` as the user's python starts it (probes.started_command), once the sealed proof
    has ended (run_doctor). `target`: whether a check reads OBLITERATUS and transformers."""
    completed = runner.run(started_command(python, name, target), timeout=timeout, env=env, own_group=True,
                           cancel=cancel)
    return ProbeOutcome(name, _last_json_object(completed.stdout, name), completed,
                        _last_json_object(completed.stdout, "files"))


def _last_json_object(stdout: str, probe: str) -> Dict[str, Any]:
    """The probe's last report line; other JSON a library prints on stdout is not it."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("probe") == probe:
                return value
    return {}


def _run_pip_check(python: str) -> runner.Completed:
    # Looked up at call time so that tests can replace it.
    interpreters = importlib.import_module("jetson_install.envs.interpreters")
    completed: runner.Completed = interpreters.pip_check(python)
    return completed



def package_index_cpu_build(version: str) -> bool:
    """torch's own CPU wheels carry the local label `+cpu` (2.8.0+cpu); no vendor build does."""
    local = version.partition("+")[2]
    return local == "cpu" or local.startswith("cpu.")


def _without_source_options(command: str) -> str:
    """The command line without the options that chose the vendor source it is about to replace."""
    words, kept = shlex.split(command), []
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
        elif word in ("--vendor-index",):
            skip_value = True
        elif word != "--vendor-fallback" and not word.startswith("--vendor-index="):
            kept.append(word)
    return " ".join(shlex.quote(word) for word in kept)


@dataclass(frozen=True)
class Context:
    python: str
    platform: Optional["Platform"]
    channel: Optional["Channel"]
    vendor: Optional["VendorSource"]  # what the install took; None: the channel's first source
    torch: ProbeOutcome  # sealed: the proof
    bnb: ProbeOutcome  # sealed: the proof
    pip_check: Optional[runner.Completed]
    source_commit: Optional[str] = None  # OBLITERATUS' commit, as the install recorded its source
    # How to make this environment again: the install's own command line while an install
    # verifies its new environment (which is discarded if the checks fail), else one for it.
    install_command: Optional[str] = None
    profile: Profile = JETSON  # what the environment is expected to be (the preflight's: CPU torch)
    # The doctor's own --root/--l4t as the user gave them: an install a fix prints reads the same board.
    platform_options: Tuple[str, ...] = ()
    target: str = "obliteratus"  # the command that made the environment, and makes it again
    # The integrity probe: start-up hooks, the vendor files against what their wheels held (or
    # their RECORDs), and every file that ran in the sealed proof.
    integrity: ProbeOutcome = ProbeOutcome("integrity", {}, None)
    # The strict gate: the vendor files are hashed, and all that ran is held to the wheels' hashes.
    strict: bool = False
    # What --with and `add` put on the stack (the additions probe's findings), and each
    # --check-command as given with how it ended.
    additions_requested: Tuple[str, ...] = ()
    additions: ProbeOutcome = ProbeOutcome("additions", {}, None)
    check_commands: Tuple[Tuple[str, runner.Completed], ...] = ()
    # The assembler probe: whether the environment's Triton assembles for the board's GPU.
    assembler: ProbeOutcome = ProbeOutcome("assembler", {}, None)
    # The same torch and bitsandbytes probes as the user's python starts them (site on, hooks
    # run): what they report must be what the sealed proof found.
    torch_started: ProbeOutcome = ProbeOutcome("torch", {}, None)
    bnb_started: ProbeOutcome = ProbeOutcome("bitsandbytes", {}, None)

    @property
    def target_probe(self) -> ProbeOutcome:
        """What the target's own checks read (OBLITERATUS, transformers): the torch probe as the
        user's python starts it, where it ran. The sealed proof leaves the target out: the proof
        of CUDA needs none of it, and an editable one is on the path only through its .pth."""
        return self.torch_started if self.torch_started.completed is not None else self.torch

    @property
    def environment(self) -> str:
        return str(Path(self.python).parent.parent)

    @property
    def site_packages(self) -> Tuple[Path, ...]:
        """Where the interpreter imports from, as the torch probe found before importing torch;
        the environment's own site-packages where the probe did not get that far."""
        listed = (self.torch.section("python") or {}).get("site_packages")
        if isinstance(listed, list) and all(isinstance(path, str) for path in listed):
            return tuple(Path(path) for path in listed)
        return tuple(site_packages_of(Path(self.environment)))

    def made_here(self) -> Optional[Path]:
        """The user's path of the environment when jetson-install made it (DIR, not DIR.d/env-<id>)."""
        environment = Path(self.python).parent.parent
        if not (environment / STATE_DIR / COMPLETE_MARK).is_file():
            return None
        home = environment.parent
        return home.with_name(home.name[: -len(".d")]) if home.name.endswith(".d") else environment

    def _install_options(self) -> str:
        own = self.profile.reinstall_options(self)
        words = list(self.platform_options)
        if "--l4t" in own.split() and "--l4t" in words:
            at = words.index("--l4t")
            del words[at:at + 2]
        return "".join(f" {shlex.quote(word)}" for word in words) + own

    @property
    def reinstall(self) -> str:
        """The install that makes this environment again, as a command that runs as printed:
        one jetson-install made is remade in place; beside one it did not make (which it
        refuses to change), a new one."""
        if self.install_command:
            return self.install_command
        made = self.made_here()
        if made is not None:
            venv = str(made)
        elif (Path(self.environment) / "pyvenv.cfg").is_file():
            venv = f"{self.environment}-jetson-install"
        else:
            # A system interpreter's prefix (/usr): the new environment goes where an install
            # without --venv puts it, not beside the prefix. A venv has pyvenv.cfg (PEP 405,
            # https://peps.python.org/pep-0405/).
            venv = str(default_venv(self.target))
        return f"jetson-install {self.target} --venv {shlex.quote(venv)}" + self._install_options()

    def recorded_build(self, name: str) -> Optional[Dict[str, Any]]:
        """What the environment recorded of `name` built on this machine (from what, for which
        capability), or None when it was downloaded or the environment recorded nothing."""
        record = read_record(Path(self.python).parent.parent)
        build = record.built.get(name) if record is not None else None
        return dict(build) if build is not None else None

    @property
    def capability(self) -> Optional[Tuple[int, int]]:
        cuda = self.torch.section("cuda") or {}
        value = cuda.get("capability") or self.bnb.data.get("capability")
        return (int(value[0]), int(value[1])) if value else None

    @property
    def capability_digits(self) -> str:
        """"87" for an Orin; what bitsandbytes' source build wants as COMPUTE_CAPABILITY."""
        if self.capability:
            return f"{self.capability[0]}{self.capability[1]}"
        if self.platform is not None and self.platform.compute_capability:
            return self.platform.compute_capability.replace(".", "")
        return "<XY>"

    @property
    def tegra(self) -> bool:
        # These capabilities exist only on Jetson iGPUs with L4T's CUDA (platform-data.toml), so
        # they count as Tegra even where the platform was not detected (a container, a bare root).
        if self.capability in platform_data().tegra_capabilities:
            return True
        return self.platform is not None and self.platform.jetson and self.platform.kind != "sbsa"

    @property
    def source(self) -> Optional["VendorSource"]:
        if self.vendor is not None:
            return self.vendor
        return self.channel.primary if self.channel is not None else None

    def vendor_install(self, package: str) -> Optional[str]:
        """The uv command (re)installing the vendor build of package, if the source has one."""
        source = self.source
        if source is None:
            return None
        # --no-deps: the vendor source may supply nothing but the vendor build itself;
        # --reinstall-package: a wrong build of the same version otherwise counts as satisfied.
        flags = " ".join(("--python", shlex.quote(self.python), "--no-deps", "--reinstall-package", package))
        pin = source.pins.get(package)
        if source.index and pin:
            return f'{uv_command()} pip install {flags} --default-index {source.index} "{package}=={pin}"'
        if source.default_index and pin:
            return f'{uv_command()} pip install {flags} "{package}=={pin}"'
        # Direct wheel URLs: the file name starts with the distribution name and a dash.
        for url in source.wheels:
            if url.rsplit("/", 1)[-1].startswith(package + "-"):
                return f"{uv_command()} pip install {flags} {url}"
        return None

    def reinstall_command(self, options: str = "") -> str:
        """The install that rebuilds this environment (with `options` added), where
        jetson-install can: it remakes an environment it made (the pinned tag, the vendor
        constraints), and refuses to change one it did not make, so for that one it makes a new
        environment beside it (or, for a system interpreter, in the default place)."""
        if self.made_here() is not None:
            return self.reinstall + options
        return (f"{self.reinstall}{options} (a new environment: jetson-install changes only "
                f"environments it made)")

    def other_python_install(self, python: str, want: str) -> str:
        """The vendor builds are for Python `want` only, this interpreter's is `python`: an
        install with a Python `want` found here, else how to get one first (the install then
        finds it itself, as served_interpreter would)."""
        lead = f"channel {self.channel.id}'s " if self.channel is not None else "the "
        lead += f"vendor builds are for Python {want}, this environment's is {python}"
        found = served_interpreter(want, (want,))
        if found is not None:
            return f"{lead}: install them with Python {want}: {self.reinstall_command(' --python ' + shlex.quote(found))}"
        install, _ = python_install(want)
        return f"{lead}, and this machine lacks Python {want}: install it ({install}), then run: {self.reinstall_command()}"

    def other_source_fix(self) -> str:
        """A source other than the one that served the wrong torch: reinstalling from that
        one again would only bring the same build back."""
        channel = self.channel
        reinstall = _without_source_options(self.reinstall)
        if channel is not None and self.source is not None and len(channel.sources) > 1 \
                and self.source.location != channel.sources[1].location:
            return (f"install from the channel's fallback source ({channel.sources[1].location}): "
                    f"{reinstall} --vendor-fallback")
        build = f"the CUDA {self.expected_cuda} build" if self.expected_cuda else "a CUDA build"
        return f"install from an index that serves {build} of torch: {reinstall} --vendor-index URL"

    def torch_wrong_build_fix(self, version: str) -> str:
        """For a CPU-only or other-CUDA torch. The package index's own CPU build (`+cpu`) came
        from a plain pip or uv install: the channel's preferred set replaces it. When it carries
        the pinned version without that label, the vendor source itself served it, and
        reinstalling from there brings the same build back. In an install's verify the vendor
        step took it from the vendor source, whatever its label: only another source helps."""
        if self.install_command is not None:
            return self.other_source_fix()
        if package_index_cpu_build(version):
            fix = f"install the channel's vendor set in an environment jetson-install makes: {self.reinstall}"
            in_place = self.vendor_install("torch")
            return f"{fix}; or replace torch in this environment: {in_place}" if in_place else fix
        pin = self.source.pins.get("torch") if self.source is not None else None
        try:
            served_by_source = bool(pin) and satisfies(version, f"=={pin}")
        except (InvalidVersion, InvalidSpecifier):
            served_by_source = False
        if not served_by_source:
            return self.torch_install_fix()
        return f"{self.other_source_fix()}; if another installer replaced it after the install: {self.torch_install_fix()}"

    @property
    def expected_cuda(self) -> Optional[str]:
        return (self.platform.cuda if self.platform is not None else None) or (
            self.channel.cuda if self.channel is not None else None
        )

    def torch_install_fix(self) -> str:
        own = self.profile.reinstall_fix(self)
        if own is not None:
            return own
        python = (self.torch.section("python") or {}).get("version")
        channel = self.channel
        if channel is not None and isinstance(python, str) and ".".join(python.split(".")[:2]) != channel.python \
                and self.install_command is None:
            # The vendor builds are for the channel's Python only: installing them into this
            # interpreter finds none; an install picks the channel's Python itself.
            return self.other_python_install(python, channel.python)
        command = self.vendor_install("torch")
        if command:
            return f"{command} (channel {self.channel.id})" if self.channel is not None else command
        if self.platform is not None and self.platform.jetson:
            return "install the JetPack torch wheel for this L4T (a Jetson AI Lab or NVIDIA redist build), not PyPI's"
        return "install a CUDA build of torch that matches this machine's driver, not a CPU-only one"

    def bnb_install_fix(self) -> str:
        own = self.profile.reinstall_fix(self)
        if own is not None:
            return own
        if not self.tegra:
            return (f"{uv_command()} pip install --python {shlex.quote(self.python)} --no-deps --reinstall-package "
                    "bitsandbytes bitsandbytes")
        # The aarch64 wheels are SBSA builds without sm_87/sm_72; build on the device with the
        # exact capability (docs/source/installation.mdx, https://github.com/bitsandbytes-foundation/bitsandbytes).
        build = (
            "build it on the device: git clone https://github.com/bitsandbytes-foundation/bitsandbytes"
            f" && cd bitsandbytes && cmake -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY={self.capability_digits} -S ."
            f" && make -j4 && {uv_command()} pip install --python {shlex.quote(self.python)} --no-deps ."
        )
        vendor = self.vendor_install("bitsandbytes")
        return f"{vendor}; or {build}" if vendor else build

    def numpy_fix(self) -> str:
        source = self.source
        spec = source.numpy if source is not None and source.numpy else "<2"
        return f'{uv_command()} pip install --python {shlex.quote(self.python)} "numpy{spec}"'
