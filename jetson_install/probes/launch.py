"""How the doctor starts a probe that decides `cuda`, and the account of every file that ran in
it (standalone; stdlib only; Python 3.8+).

    python -I -S -X pycache_prefix=EMPTY launch.py --sealed PROBE.py [ARGS...]
    python launch.py PROBE.py [ARGS...]          as the user's `python` starts

Sealed: no `.pth` file is processed and no sitecustomize or usercustomize imported (-S), no
PYTHON* variable read (-I; the doctor also starts it without them), no __pycache__ of the
environment read (pycache_prefix names the doctor run's fresh, empty folder, shared by its
sealed probes, where Triton's and inductor's caches go too; no process that runs the
environment's own code runs until they have ended, so nothing else writes there; torch
compiles in this process, never in workers started site on); the
environment's site folders, as site_layout.py finds them from its layout, are appended to
sys.path, never given to site.addsitedir (which would run their .pth files).
As started, nothing is changed: the hooks have run before this file.

Either way, once the probe returns (or raises, or calls sys.exit), one more JSON line:
{"probe": "files", "sealed": ..., "site_dirs": [...], "path": sys.path, "pycache": ...,
"modules": {FOLDER: [NAME...]}, "mapped": [...]}: each imported module's file (its __file__, else its spec's origin: a
sourceless .pyc too), this folder's probes left out; as started also the cached .pyc each one
has (`cached`) and the files of the modules loaded before the probe started (`startup`: what
the start-up hooks ran), and every file mapped into the process (/proc/self/maps): each
shared object, the interpreter's included. The doctor holds each to what the environment should contain.
"""

import json
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def grouped(paths):
    """{folder: [names]} for a compact report line."""
    found = {}
    for path in sorted(paths):
        folder, name = os.path.split(path)
        found.setdefault(folder, []).append(name)
    return found


def module_files():
    """The file each imported module came from, and the cached .pyc each has that exists."""
    files, cached = set(), set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        spec = getattr(module, "__spec__", None)
        if not isinstance(path, str) and spec is not None and getattr(spec, "has_location", False):
            path = spec.origin
        if isinstance(path, str) and os.path.isabs(path) and os.path.dirname(os.path.abspath(path)) != HERE:
            files.add(path)
            pyc = getattr(module, "__cached__", None)
            if isinstance(pyc, str) and os.path.isfile(pyc):
                cached.add(pyc)
    return files, cached


def mapped_files():
    """Every file mapped into this process (proc(5), /proc/[pid]/maps: the path is the sixth
    field, and ' (deleted)' ends it once the file is gone); None where there is no /proc."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return None
    found = set()
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            found.add(fields[5])
    return sorted(found)


def account(sealed, folders, startup):
    files, cached = module_files()
    report = {"probe": "files", "sealed": sealed, "site_dirs": folders, "path": list(sys.path),
              "pycache": getattr(sys, "pycache_prefix", None), "modules": grouped(files), "mapped": mapped_files()}
    if not sealed:
        report["cached"] = sorted(cached)
        report["startup"] = sorted(startup)
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()


def main(argv):
    sealed = bool(argv) and argv[0] == "--sealed"
    if sealed:
        argv = argv[1:]
        layout = runpy.run_path(os.path.join(HERE, "site_layout.py"))
        folders = layout["site_folders"]()[0]
        sys.path.extend(folder for folder in folders if folder not in sys.path)
        # inductor's parallel compile starts its workers as `sys.executable ENTRY`, site on and
        # without this pycache folder (torch/_inductor/compile_worker/subproc_pool.py): they would
        # run the environment's .pth hooks while the proof runs. One thread compiles, in this
        # process (the variable comes first in torch/_inductor/config.py decide_compile_threads).
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        prefix = getattr(sys, "pycache_prefix", None)
        if prefix:
            # What the proof compiles goes to its own fresh folder, not to the user's caches.
            os.environ["TRITON_CACHE_DIR"] = os.path.join(prefix, "triton")
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(prefix, "inductor")
    else:
        folders = [path for path in sys.path if os.path.basename(path) in ("site-packages", "dist-packages")]
    # What ran before the probe: the interpreter's start, and as started every start-up hook.
    startup = module_files()[0]
    probe = os.path.abspath(argv[0])
    sys.argv = [probe] + argv[1:]
    code = 0
    try:
        runpy.run_path(probe, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    finally:
        account(sealed, folders, startup)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
