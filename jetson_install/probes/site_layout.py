"""Which folders Python's `site` reads for this interpreter, worked out without running `site`
(standalone; stdlib only; Python 3.8+). Loaded by the probes that run as `python -I -S` with
runpy.run_path, since -I keeps their own folder off sys.path.

A venv's folders come from its layout, as Lib/site.py's venv() finds them on every
distribution: pyvenv.cfg beside the executable or one folder up, its prefix the folder above
bin, and `lib/pythonX.Y/site-packages` (and the `sys.platlibdir` spelling) under it. Not from
site.getsitepackages() alone: Debian's and Ubuntu's patched site.py return only dist-packages
folders there unless sys.prefix differs from sys.base_prefix, which is never so under -S
(https://salsa.debian.org/cpython-team/python3, debian/patches/distutils-install-layout.diff:
its getsitepackages adds site-packages only for a virtual environment).
"""

import os
import site
import sys


def venv_config(executable):
    """(prefix, include-system-site-packages) of the venv `executable` belongs to, or None.
    Lib/site.py, venv(): a pyvenv.cfg without the key includes the system's site folders."""
    exe_dir = os.path.dirname(os.path.abspath(executable))
    prefix = os.path.dirname(exe_dir)
    for folder in (exe_dir, prefix):
        config = os.path.join(folder, "pyvenv.cfg")
        if os.path.isfile(config):
            system_site = True
            with open(config, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    key, sep, value = line.partition("=")
                    if sep and key.strip().lower() == "include-system-site-packages":
                        system_site = value.strip().lower() == "true"
            return prefix, system_site
    return None


def prefix_folders(prefix, in_venv):
    """The site folders under one prefix. In a venv (`site` then sees sys.prefix differ from
    sys.base_prefix): `lib/pythonX.Y/site-packages` (and its platlibdir spelling), as upstream
    CPython names them, then whatever this interpreter's own getsitepackages adds (Debian's
    dist-packages folders). Outside one, what getsitepackages answers under -S is what `site`
    reads, since sys.prefix is then the same either way."""
    if not in_venv:
        return site.getsitepackages([prefix])
    version = "python%d.%d" % sys.version_info[:2]
    libdirs = [getattr(sys, "platlibdir", "lib")]
    if libdirs[0] != "lib":
        libdirs.append("lib")
    folders = [os.path.join(prefix, libdir, version, "site-packages") for libdir in libdirs]
    return folders + site.getsitepackages([prefix])


def user_site_enabled(allowed):
    # Lib/site.py, check_enableusersite: not for a set-user-id or set-group-id process.
    if not allowed or not hasattr(os, "getuid"):
        return allowed
    return os.getuid() == os.geteuid() and os.getgid() == os.getegid()


def site_folders():
    """The folders `site` puts on the path when this interpreter starts, in its order (the
    venv's, the user's, the system's), each once and only those that exist; and the user's
    site folder among them, where `site` adds it (it alone runs usercustomize then)."""
    venv = venv_config(sys.executable)
    if venv is not None:
        prefix, system_site = venv
        ordered = prefix_folders(prefix, True)
        base = (sys.base_prefix, sys.base_exec_prefix) if system_site else ()
        user_allowed = system_site
    else:
        ordered, base, user_allowed = [], (sys.prefix, sys.exec_prefix), True
    user = site.getusersitepackages() if user_site_enabled(user_allowed) else None
    if user:
        ordered.append(user)
    for prefix in base:
        ordered += prefix_folders(prefix, venv is not None)
    kept, seen = [], set()
    for folder in ordered:
        real = os.path.realpath(folder)
        if os.path.isdir(folder) and real not in seen:
            seen.add(real)
            kept.append(os.path.abspath(folder))
    return kept, (os.path.abspath(user) if user and os.path.abspath(user) in kept else None)
