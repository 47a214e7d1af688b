"""The existing-torch route (`--use-existing-torch`): keep the CUDA torch stack the chosen
interpreter already has (an L4T PyTorch or NGC iGPU image, or a system install).

uv does not look into a venv's parent when it resolves or installs (astral-sh/uv#17215,
#15162), so a `--system-site-packages` venv alone would let it plan a second torch into the
venv. Instead the torch stack found is handed to the resolver as given: a metadata-only
wheel per package at its exact version, with no dependencies, named by a direct file
reference (so no index is ever asked for it). The resolution without those packages is then
installed with `--no-deps` into a venv that sees the interpreter's own site-packages, the
approach of OBLITERATUS' scripts/setup_jetson.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name

from jetson_install.base import git_urls
from jetson_install.base.layout import (
    CONSTRAINTS_FILE,
    GIVEN_FILE,
    GIVEN_WHEELS_DIR,
    KEPT_RESOLUTION_FILE,
    REQUIREMENTS_FILE,
    TO_INSTALL_FILE,
    state_of,
)
from jetson_install.base.outputs import write_own
from jetson_install.base.steps import Step
from jetson_install.base.versions import satisfies
from jetson_install.catalog.catalog import Channel
from jetson_install.catalog.constraints import constraint_lines
from jetson_install.catalog.identity import Resolution, VersionSet
from jetson_install.envs.recorded import write_constraints, write_private, write_requirements
from jetson_install.envs.manifest import read_kept, write_manifest
from jetson_install.envs.stack import ExistingStack
from jetson_install.planning.plan import Execution, Handler, InterpreterPolicy, Plan, Route
from jetson_install.planning.routes import shared
from jetson_install.planning.routes.download import with_extra
from jetson_install.tools import uv

__all__ = ["ExistingTorchRoute", "judge_stack", "plan_existing",
           "resolved_requirements", "write_given_wheels"]

@dataclass(frozen=True)
class ExistingTorchRoute(Route):
    stack: Optional[ExistingStack] = None

    name = "existing-torch"

    @property
    def kept_stack(self) -> ExistingStack:
        assert self.stack is not None
        return self.stack

    def steps(self, plan: Plan) -> Tuple[Step, ...]:
        stack = self.kept_stack
        python, state = shared.python_of(plan), shared.state_of(plan)
        default_index = plan.settings.default_index.value
        torch = stack.torch
        assert torch is not None
        kept = ", ".join(f"{name} {version}" for name, version in stack.pins.items())
        return (
            Step("interpreter", "interpreter", f"use {stack.python}: keep torch {torch.version} (CUDA {torch.cuda}) "
                                               f"from {torch.location}"),
            shared.environment_step(plan, stack.python,
                                    f"create a new environment beside {plan.venv} that sees {stack.python}'s packages",
                                    system_site_packages=True),
            Step("resolve", "resolve-kept", f"resolve {plan.target.title}'s dependencies with {kept} given as they are",
                 (tuple(uv.compile_argv(python, f"{state}/{REQUIREMENTS_FILE}", f"{state}/{CONSTRAINTS_FILE}",
                                        default_index, f"{state}/{KEPT_RESOLUTION_FILE}")),)),
            Step("target", "target", f"install {plan.target.title} and the rest of the resolution without dependencies",
                 (tuple(uv.no_deps_install_argv(python, f"{state}/{TO_INSTALL_FILE}", default_index)),)),
            shared.protect_step(plan, "keep the stack in force after jetson-install exits: pip.conf, and UV_CONSTRAINT and "
                                "UV_EXCLUDE in the activate scripts"),
            shared.check_step(plan, "check the installed dependencies, the kept stack included"),
            shared.verify_step(plan, "prove torch.cuda and bitsandbytes run CUDA kernels; keep the evidence"
                               if plan.verify else "check that torch imports and is a CUDA build for this Python "
                               "(no GPU needed; --no-verify skips the GPU checks)"),
            shared.switch_step(plan),
        )

    def complete(self, plan: Plan, chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> Plan:
        return plan  # nothing is resolved: the stack is kept as it is

    def interpreter_policy(self, plan: Plan) -> InterpreterPolicy:
        # The stack's own interpreter; its Python is the ABI its packages were built for.
        return InterpreterPolicy(self.kept_stack.python, self.kept_stack.abi, warn_other_abi=False)

    def resolves(self) -> bool:
        return False

    def vendor_label(self, plan: Plan) -> str:
        return f"kept from {self.kept_stack.python} (--use-existing-torch)"

    def fallback_location(self, plan: Plan) -> Optional[str]:
        return None

    def kept(self) -> Mapping[str, str]:
        return self.kept_stack.pins

    def facts(self) -> Dict[str, Any]:
        # A changed image torch (another RECORD) must give a new environment; a kept stack has
        # no vendor record (record.py), so its versions are the pins.
        return {"existing": self.kept_stack.to_json(), "kept_pins": dict(self.kept_stack.pins)}

    def describe(self) -> Dict[str, Any]:
        return {"existing_torch": self.kept_stack.to_json()}

    def handlers(self) -> Mapping[str, Handler]:
        return {"resolve-kept": _resolve_around_kept}

    def lock_conflict(self) -> Optional[Tuple[str, str, str]]:
        return ("--use-existing-torch", ", a vendor torch among them, not the interpreter's",
                "drop --use-existing-torch, or install without the lock")


def judge_stack(stack: ExistingStack, channel_cuda: Optional[str], requires_python: str,
                requires_torch: str) -> Tuple[str, str, List[str]]:
    """(reason, remedy, warnings): an empty reason when the stack can be kept."""
    remedy = ("start from an image that carries the Jetson CUDA torch (`jetson-install plan obliteratus` lists them), "
              "or drop --use-existing-torch to install the vendor build into a new environment")
    warnings: List[str] = []
    torch = stack.torch
    where = f"the torch of {stack.python}"
    if not satisfies(f"{stack.python_version}", requires_python):
        return (f"unsupported: {stack.python} is Python {stack.python_version}; OBLITERATUS needs Python "
                f"{requires_python}"), remedy, warnings
    if torch is None:
        return f"unsupported: {stack.python} has no torch to keep", remedy, warnings
    if stack.torch_cuda_error:
        return f"unsupported: {where} cannot be judged: {stack.torch_cuda_error}", remedy, warnings
    if not torch.cuda:
        return (f"unsupported: {where} ({torch.version} in {torch.location}) is a CPU-only build "
                "(torch.version.cuda is None)"), remedy, warnings
    if channel_cuda and torch.cuda.split(".")[0] != channel_cuda.split(".")[0]:
        return (f"unsupported: {where} ({torch.version}) is built for CUDA {torch.cuda}, "
                f"and this JetPack has CUDA {channel_cuda}"), remedy, warnings
    if not satisfies(torch.version, requires_torch):
        return (f"unsupported: {where} is {torch.version}; OBLITERATUS needs torch {requires_torch}"), remedy, warnings
    if channel_cuda and torch.cuda != channel_cuda:
        # NGC iGPU images bring a newer CUDA 12 userspace than JetPack's (the compatibility table of
        # https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform-release-notes/pytorch-jetson-rel.html);
        # the doctor's CUDA checks decide whether it runs on this board.
        warnings.append(f"{where} is built for CUDA {torch.cuda}, JetPack has CUDA {channel_cuda}: "
                        "it runs only where the image brings its own CUDA runtime")
    return "", "", warnings


def plan_existing(base: Plan, stack: ExistingStack, channel: Optional[Channel], reason: str, remedy: str) -> Plan:
    """The plan that keeps the interpreter's torch stack: no vendor step; the target's other
    dependencies are resolved around the kept packages and installed without dependencies.
    `reason` and `remedy` say why there is no channel, if there is none."""
    target = base.target
    warnings: List[str] = list(base.platform.warnings)
    if channel is not None:
        reason, remedy, found = judge_stack(stack, channel.cuda, target.requires_python, target.requires_torch)
        warnings += found
    supported = not reason
    pins = stack.pins
    bnb = pins.get("bitsandbytes")
    with_quantization = bnb is not None and satisfies(bnb, target.requires_bitsandbytes)
    if supported and not with_quantization and base.extra:
        warnings.append(f"{stack.python} has no bitsandbytes {target.requires_bitsandbytes}: "
                        f"installing without the '{base.extra}' extra")
    plan = dataclasses.replace(
        base, route=ExistingTorchRoute(stack=stack), channel=channel, supported=supported, reason=reason,
        remedy=remedy, python_abi=stack.abi, interpreter=stack.python, vendor=None,
        requirement=with_extra(base.requirement, base.extra if with_quantization else None),
        constraints=tuple(constraint_lines([f"{name}=={version}" for name, version in pins.items()], None)),
        warnings=tuple(warnings), pins=pins)
    return dataclasses.replace(plan, steps=plan.route.steps(plan) if supported else ())


def write_given_wheels(stack: ExistingStack, directory: Path) -> List[str]:
    """A metadata-only wheel per kept package (exact version, no dependencies) and the
    requirement naming each by file, so the resolver takes them as they are."""
    directory.mkdir(parents=True, exist_ok=True)
    requirements = []
    for name, version in stack.pins.items():
        path = directory / f"{name}-{version}-py3-none-any.whl"
        _write_metadata_wheel(path, name, version)
        requirements.append(f"{name} @ {path.as_uri()}")
    return requirements


def _write_metadata_wheel(path: Path, name: str, version: str) -> None:
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 "Summary: Already installed in the chosen interpreter; kept by jetson-install\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: jetson-install\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(data)}")
            archive.writestr(member, data)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n")


def resolved_requirements(compiled: str, kept: Sequence[str]) -> List[str]:
    """The lines of `uv pip compile` output that are to be installed: all but the kept stack."""
    lines = []
    for line in compiled.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[\s=<>!~;@\[]", line, maxsplit=1)[0]
        if canonicalize_name(name) not in kept:
            lines.append(line)
    return lines


def _resolve_around_kept(step: Step, run: Execution) -> str:
    """Resolve the target with the kept stack as given, and write what is left to install."""
    plan = run.plan
    route = plan.route
    assert isinstance(route, ExistingTorchRoute)
    stack = route.kept_stack
    state = state_of(run.staging)
    write_constraints(run.staging, plan.constraints)
    write_own(state / GIVEN_FILE, json.dumps(stack.to_json(), indent=2) + "\n")
    # No wheel of the kept stack was downloaded here: its files are measured as they are now,
    # against the RECORDs the plan read, and kept outside site-packages, where no later
    # package's RECORD can vouch for a file changed after this (envs/manifest.py).
    write_manifest(run.staging, [read_kept(name, package.version, package.location, package.record_sha256, stack.python)
                                 for name, package in stack.packages.items()])
    # Written only for the user to read: an archive URL may carry a token (a git URL's go to uv's git apart).
    own = [git_urls.requirement_without_credentials(line) for line in plan.sources]
    write_requirements(run.staging, own + write_given_wheels(stack, state / GIVEN_WHEELS_DIR))
    run.run(step.argv,
            f"a dependency of {plan.target.title} needs another version of a package the interpreter keeps "
            f"({', '.join(f'{n} {v}' for n, v in stack.pins.items())}), or an index is unreachable (see the "
            f"message); start from an image whose torch fits, or drop --use-existing-torch. Then run: {run.rerun}")
    to_install = resolved_requirements((state / KEPT_RESOLUTION_FILE).read_text(), list(stack.pins))
    write_private(state / TO_INSTALL_FILE, "\n".join(to_install) + "\n")  # may name a --source token
    return f"{len(to_install)} packages to install; kept: {', '.join(f'{n} {v}' for n, v in stack.pins.items())}"
