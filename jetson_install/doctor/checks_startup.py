"""The environment as its user starts it agrees with the sealed proof.

The probes that decide `cuda` run sealed (no `.pth` file, no sitecustomize, no PYTHON*
variable, no cached bytecode of the environment), then again as the user's `python` starts.
Code that runs at start-up (a `.pth` line, a sitecustomize, a cached .pyc Python runs in place
of its source) is judged by what it does, not by its kind or its text: what torch and
bitsandbytes report must be the same both ways, or the strict gate fails, naming the start-up
hooks in the environment's site folders and the distribution that installed each.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install.doctor.checks_integrity import Hook, hooks, probe_fix
from jetson_install.doctor.context import Context, ProbeOutcome, uv_command
from jetson_install.doctor.results import FAIL, OK, Verdict

#: What the torch probe found, in the order a report names it: its kernels' sections.
_KERNELS = ("matmul", "conv2d", "bf16_backward", "jetson_contract", "compile")
#: How many paths a report names.
_NAMED = 3


def _kernel(section: Mapping[str, Any]) -> str:
    """A kernel's result, as it compares: its numbers may differ from run to run, its outcome not."""
    if section.get("done") is False:
        return "did not finish"
    if section.get("ran"):
        good = section.get("finite") and (section.get("allclose") if "allclose" in section else section.get("on_cuda"))
        return "passed" if good else "wrong result"
    return "raised an error" if section.get("error") else "not run"


def torch_verdict(outcome: ProbeOutcome) -> Dict[str, str]:
    """What the torch probe reports that decides `cuda`: the build, the device, the kernels."""
    if not outcome.data:
        return {"torch probe": "printed no findings"}
    torch = outcome.section("torch") or {}
    if not torch.get("imported"):
        error = str(torch.get("error") or "").split(":")[0]
        return {"torch": f"does not import ({error})" if error else "does not import"}
    found = {"torch": f"{torch.get('version')} (CUDA {torch.get('cuda') or 'none'}, built with CUDA: "
                      f"{torch.get('cuda_built')})"}
    cuda = outcome.section("cuda") or {}
    found["CUDA available"] = str(bool(cuda.get("available")))
    count = int(cuda.get("device_count") or 0) if cuda.get("available") else 0
    found["CUDA devices"] = str(count) if count else "none"
    if count:
        found["device"] = str(cuda.get("device_name"))
        found["capability"] = ".".join(str(part) for part in cuda.get("capability") or ())
    found["arch list"] = " ".join(cuda.get("arch_list") or ()) or "empty"
    for key in _KERNELS:
        section = outcome.data.get(key)
        if isinstance(section, dict):
            found[key.replace("_", " ")] = _kernel(section)
    return found


def bnb_verdict(outcome: ProbeOutcome) -> Dict[str, str]:
    """What the bitsandbytes probe reports: the library it loaded and its kernels' results."""
    if not outcome.data:
        return {"bitsandbytes probe": "printed no findings"}
    library = outcome.data.get("library")
    if not isinstance(library, dict):
        return {"bitsandbytes": "does not import" if outcome.data.get("import_error") else "loaded no library"}
    found = {"bitsandbytes": f"{library.get('file') or 'no library'} ({library.get('class')})"}
    kernels = outcome.data.get("kernels")
    for name, result in (kernels.items() if isinstance(kernels, dict) else ()):
        if isinstance(result, dict):
            found[f"bitsandbytes {name}"] = ("did not finish" if result.get("done") is False
                                             else "passed" if result.get("ok") else "failed")
    return found


def differences(sealed: Mapping[str, str], started: Mapping[str, str]) -> List[Tuple[str, str, str]]:
    """(what, sealed, as started) for each finding that differs, in the sealed report's order."""
    keys = list(sealed) + [key for key in started if key not in sealed]
    return [(key, sealed.get(key, "not reported"), started.get(key, "not reported")) for key in keys
            if sealed.get(key) != started.get(key)]


Reading = Callable[[ProbeOutcome], Dict[str, str]]


def _pairs(ctx: Context) -> List[Tuple[ProbeOutcome, ProbeOutcome, Reading]]:
    """The sealed and as-started runs of each probe that ran both ways, and how to read them."""
    pairs: List[Tuple[ProbeOutcome, ProbeOutcome, Reading]] = []
    if ctx.torch.completed is not None and ctx.torch_started.completed is not None:
        pairs.append((ctx.torch, ctx.torch_started, torch_verdict))
    if ctx.bnb.completed is not None and ctx.bnb_started.completed is not None:
        pairs.append((ctx.bnb, ctx.bnb_started, bnb_verdict))
    return pairs


def changed(ctx: Context) -> List[Tuple[str, str, str]]:
    """What torch and bitsandbytes report differently as started than sealed."""
    found: List[Tuple[str, str, str]] = []
    for sealed, started, verdict in _pairs(ctx):
        if sealed.data and not started.data:
            found.append((f"the {sealed.name} probe", "reported", started.failure()))
        elif started.data and not sealed.data:
            found.append((f"the {sealed.name} probe", sealed.failure(), "reported"))
        else:
            found += differences(verdict(sealed), verdict(started))
    return found


def _site_folders(ctx: Context) -> List[str]:
    folders = ctx.integrity.data.get("site_dirs") or ctx.torch.files.get("site_dirs") or []
    return [os.path.realpath(folder) for folder in folders if isinstance(folder, str)]


def _loaded(outcome: ProbeOutcome) -> List[str]:
    """What a probe's launcher said ran in it: each module's file and each mapped file."""
    modules = outcome.files.get("modules")
    listed = [os.path.join(folder, name) for folder, names in (modules.items() if isinstance(modules, dict) else ())
              if isinstance(names, list) for name in names if isinstance(name, str)]
    mapped = outcome.files.get("mapped")
    return listed + [path for path in (mapped if isinstance(mapped, list) else ()) if isinstance(path, str)]


def ran_at_start_up(ctx: Context) -> List[str]:
    """Files in the environment's site folders that ran as the environment started, before the
    probe did, and that the sealed proof never loaded: what the start-up hooks brought (torch's
    own files, which a hook may import early, are the proof's), relative to their folder."""
    folders = _site_folders(ctx)
    sealed = {os.path.realpath(path) for outcome in (ctx.torch, ctx.bnb) for path in _loaded(outcome)}
    found = set()
    for outcome in (ctx.torch_started, ctx.bnb_started):
        startup = outcome.files.get("startup")
        for path in startup if isinstance(startup, list) else ():
            real = os.path.realpath(str(path))
            folder = next((folder for folder in folders if real.startswith(folder + "/")), None)
            if folder is not None and real not in sealed:
                found.add(os.path.relpath(real, folder))
    return sorted(found)


def _in_site(ctx: Context) -> List[Hook]:
    """The start-up hooks in the environment's own site folders (the OS's own, outside them,
    are the platform's)."""
    folders = _site_folders(ctx)
    found: Dict[str, Hook] = {}  # by its real path: a folder on the path twice (through a link) holds it once
    for hook in hooks(ctx):
        real = os.path.realpath(hook.path)
        if any(real.startswith(folder + "/") for folder in folders):
            found.setdefault(real, hook)
    return list(found.values())


def _named(items: Sequence[str]) -> str:
    more = f" (and {len(items) - _NAMED} more)" if len(items) > _NAMED else ""
    return ", ".join(items[:_NAMED]) + more


def startup_line(ctx: Context) -> Optional[str]:
    """The one line that says start-up code changes what torch reports, or None."""
    found = changed(ctx)
    if not found:
        return None
    sealed = ", ".join(f"{what}: {before}" for what, before, _ in found)
    started = ", ".join(f"{what}: {after}" for what, _, after in found)
    line = f"code that runs at start-up changes what torch reports: sealed ({sealed}), as started ({started})"
    in_site = _in_site(ctx)
    folders = ", ".join(sorted({os.path.dirname(hook.path) for hook in in_site})) or "the environment's site folders"
    if in_site:
        line += f"; start-up hooks in {folders}: {_named(_hook_texts(in_site))}"
    else:
        line += "; no .pth file runs code and there is no sitecustomize or usercustomize in the environment's site folders"
    extra = ran_at_start_up(ctx)
    if extra:
        line += f"; at start-up these ran: {_named(extra)}"
    return line


def _hook_texts(found: Sequence[Hook]) -> List[str]:
    """Each hook once: by its file name, or by its path where another folder holds a hook of
    the same name (Debian's python3 reads both /usr/local/lib/python3.X/dist-packages and
    /usr/lib/python3/dist-packages)."""
    names = [Path(hook.path).name for hook in found]
    texts = []
    for hook, name in zip(found, names):
        by = f"installed by {hook.distribution}" if hook.distribution else "installed by no distribution"
        texts.append(f"{hook.path if names.count(name) > 1 else name} ({by})")
    return texts


def check_startup_hooks(ctx: Context) -> Verdict:
    if not ctx.torch.data and not ctx.torch_started.data:
        return FAIL, f"nothing to compare: {ctx.torch.failure()}", probe_fix(ctx)
    line = startup_line(ctx)
    if line is not None:
        return FAIL, line, _startup_fix(ctx)
    in_site = _in_site(ctx)
    what = "torch and bitsandbytes report" if len(_pairs(ctx)) > 1 else "torch reports"
    if not in_site:
        return OK, f"what {what} is the same sealed and as the environment starts; no start-up hook in its site folders", None
    return (OK, f"what {what} is the same sealed and as the environment starts, with its start-up hooks: "
                f"{_named(_hook_texts(in_site))}", None)


def _startup_fix(ctx: Context) -> str:
    in_site = _in_site(ctx)
    owned = [hook for hook in in_site if hook.distribution]
    if owned:
        names = sorted({hook.distribution for hook in owned if hook.distribution})
        return (f"{uv_command()} pip uninstall --python {shlex.quote(ctx.python)} {' '.join(names)} "
                f"(installed {', '.join(Path(hook.path).name for hook in owned)}), then run the doctor again")
    if in_site:
        return "rm -- " + " ".join(shlex.quote(hook.path) for hook in in_site) + " (no distribution installed it)"
    # No hook: cached bytecode that Python ran in place of a source. Python rebuilds the caches
    # from the sources once they are gone.
    folders = " ".join(shlex.quote(folder) for folder in _site_folders(ctx)) or shlex.quote(ctx.environment)
    return f"find {folders} -name __pycache__ -type d -prune -exec rm -rf {{}} +, then run the doctor again"


def as_started_evidence(ctx: Context) -> Optional[Dict[str, Any]]:
    """The evidence's integrity.as_started: whether what torch (and bitsandbytes) report is the
    same as the environment starts; null where the probes did not run both ways."""
    if not _pairs(ctx):
        return None
    found = changed(ctx)
    return {"same": not found,
            "differs": [{"what": what, "sealed": sealed, "as_started": started} for what, sealed, started in found],
            "at_start_up": ran_at_start_up(ctx)[:20]}
