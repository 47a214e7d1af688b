"""Run by the chosen interpreter as
`python -I -S integrity_probe.py [--hash] [--record FILE] [--manifest FILE] [--ran -]`
(standalone; stdlib only; Python 3.8+): what runs when that interpreter starts, whether the
vendor distributions' files are the ones their wheels held, and what every file that ran in
the sealed proof is.

-I -S: neither the environment's `.pth` files nor `sitecustomize` run in this probe, so none of
them can change what it reports; site_layout.py beside it works out which folders `site`
would read (the venv's from its layout, the user's, the system's), as Lib/site.py does;
dist_records.py reads the distributions' RECORDs, and what_ran.py judges what ran.

- Start-up hooks: every `*.pth` file in those folders with a line that `site` executes (one
  that starts with `import` and a space or tab: Lib/site.py, addpackage), and every
  `sitecustomize` and `usercustomize` module on the path `site` builds; each with its sha256
  and the distribution whose RECORD lists it.
- Vendor files: the distributions of the torch stack, those the environment's record names
  (FILE, the install's vendor.json: its `installed` and `companions`) and those its manifest
  (vendor-files.json) names. A distribution the manifest measured is held to it: the sha256
  of each file its wheel held, read from the wheel at install time (`basis: artifact`), or, for
  a stack the install kept (--use-existing-torch), of each file as installed when the
  environment was made, checked against its RECORD then (`basis: kept`); any
  other to its installed RECORD (`basis: record`: a file any package can rewrite; PEP 376
  RECORD, https://packaging.python.org/en/latest/specifications/recording-installed-packages/).
  Each file is compared by size, and with --hash by its digest; `expected` counts the files
  held to, `verified` those that matched. Files in the folders they install into that they do
  not list are named, and so is a cached .pyc Python would run without reading its source.
- What ran (--ran -: on stdin, the `files` lines of the sealed probes, by probe): each file
  inside the environment (its site folders, its prefix) must be a file a distribution lists
  and match it; the rest is the platform the proof ran on, named by path and by the Debian
  package that installed it where /var/lib/dpkg/info/*.list says (dpkg(1)).

Prints one JSON line: {"probe": "integrity", "hashed": ..., "site_dirs": [...], "manifest": ...,
"hooks": [...], "distributions": {...}, "ran": {...}}.
"""

import importlib.machinery
import json
import os
import runpy
import stat
import sys
from concurrent.futures import ThreadPoolExecutor

# dist_records.py (the RECORDs' rows and digests) and what_ran.py (the `ran` section) beside this
# file, run rather than imported: -I keeps this folder off sys.path.
_HERE = os.path.dirname(os.path.abspath(__file__))
_RECORDS = runpy.run_path(os.path.join(_HERE, "dist_records.py"))
ALGORITHMS, INSTALLER_FILES, NAMED, Records, digest_of, located, normalize, rows_of, same_digest = (
    _RECORDS[name] for name in ("ALGORITHMS", "INSTALLER_FILES", "NAMED", "Records", "digest_of", "located",
                                "normalize", "rows_of", "same_digest"))
Ran = runpy.run_path(os.path.join(_HERE, "what_ran.py"))["Ran"]

STACK = ("torch", "torchvision", "torchaudio", "bitsandbytes")
# What `site` executes of a .pth file (Lib/site.py, addpackage).
EXECUTED = ("import ", "import\t")


def pth_files(folder):
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names if name.endswith(".pth")]


def read_pth(path):
    """(whether `site` executes a line of it, the folders it adds to the path)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return False, []
    executes, added = False, []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith(EXECUTED):
            executes = True
        else:
            folder = os.path.join(os.path.dirname(path), line.rstrip())
            if os.path.isdir(folder):
                added.append(os.path.abspath(folder))
    return executes, added


def describe_hook(kind, path, records):
    try:
        sha256 = digest_of(path).hexdigest()
    except OSError:
        sha256 = None
    return {"kind": kind, "path": path, "sha256": sha256, "distribution": records.owner_of(path)}


def start_up_hooks(folders, user, records):
    found, path = [], list(sys.path)
    for folder in folders:
        path.append(folder)
        for pth in pth_files(folder):
            executes, added = read_pth(pth)
            path.extend(added)
            if executes:
                found.append(describe_hook("pth", pth, records))
    # `site` imports the first sitecustomize (and, where it adds the user's site, usercustomize)
    # on the path; every one there is named, since removing the first would run the next.
    for kind in ("sitecustomize", "usercustomize") if user else ("sitecustomize",):
        for folder in path:
            spec = importlib.machinery.PathFinder.find_spec(kind, [folder])
            if spec is not None and spec.has_location:
                found.append(describe_hook(kind, spec.origin, records))
    return found


def read_manifest(path):
    """The environment's manifest by distribution, or None where there is none (or not one of
    format 1, which envs/manifest.py writes)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("format") != 1:
            return None
        return {normalize(name): entry for name, entry in data["distributions"].items() if isinstance(entry, dict)}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


def named(paths):
    return sorted(paths)[:NAMED]


class Verified:
    """What verify() found of one distribution, with the files that matched (by real path)."""

    def __init__(self, result, matched, basis):
        self.result, self.matched, self.basis = result, matched, basis


def expected_files(folder, dist_info, rows, entry):
    """{path: (algorithm, digest or None, size or None)} the distribution is held to, its basis,
    and the installer's own files of its dist-info it may have beside them."""
    sizes = {located(folder, relative): size for relative, _, size in rows}
    installer = {located(folder, dist_info + "/" + name) for name in INSTALLER_FILES}
    if entry is not None and entry.get("measured") and isinstance(entry.get("files"), dict):
        files = {located(folder, relative): ("sha256", digest, sizes.get(located(folder, relative)))
                 for relative, digest in entry["files"].items() if isinstance(digest, str)}
        return files, ("kept" if entry.get("kept_from") else "artifact"), installer
    files = {}
    for relative, hashed, size in rows:
        full = located(folder, relative)
        if "__pycache__/" in relative or full in installer:
            continue  # Python's own cache of a listed source; what the installer wrote
        algorithm, _, digest = hashed.partition("=")
        files[full] = (algorithm.lower(), digest or None, size)
    return files, "record", installer


def verify(key, records, entry, vendor, hash_files, pool):
    """One distribution's files against what it is held to, and what else lies in the folders
    it installs into."""
    folder, dist_info, version, text = records.dists[key]
    rows = rows_of(text) if text is not None else []
    files, basis, installer = expected_files(folder, dist_info, rows, entry)
    result = {"installed": True, "version": version, "record": text is not None, "basis": basis,
              "reason": entry.get("reason") if entry is not None and basis == "record" else None,
              "expected": len(files), "verified": 0, "files": 0, "bytes": 0}
    changed, missing, unhashed, tasks, matched = [], [], [], [], set()
    for full, (algorithm, digest, size) in sorted(files.items()):
        relative = os.path.relpath(full, folder)
        try:
            status = os.stat(full)
        except OSError:
            missing.append(relative)
            continue
        found = status.st_size
        result["files"] += 1
        result["bytes"] += found
        if not stat.S_ISREG(status.st_mode):
            changed.append(relative)  # (a FIFO in a file's place would hang the digest's read)
        # Beside a manifest the RECORD's size is only what a run without --hash can compare.
        elif size and str(found) != size and not (hash_files and basis != "record"):
            changed.append(relative)
        elif not hash_files:
            matched.add(full)
        elif algorithm in ALGORITHMS and digest:
            tasks.append((relative, full, (full, algorithm, digest)))
        else:
            unhashed.append(relative)  # its content cannot be compared
    for (relative, full, _), same in zip(tasks, pool.map(same_digest, [task for _, _, task in tasks])):
        if same:
            matched.add(full)
        else:
            changed.append(relative)
    result["verified"] = len(matched)
    recorded = {located(folder, relative) for relative, _, _ in rows}
    # A RECORD's own rows count only where it is what the files are held to; beside a
    # manifest, only for what the installer wrote into the dist-info.
    listed = set(files) | (recorded if basis == "record" else installer & recorded)
    unlisted = unlisted_files(folder, dist_info, files, listed, records, vendor)
    result.update(changed=named(changed), missing=named(missing), unlisted=named(unlisted), unhashed=named(unhashed),
                  problems=len(changed) + len(missing) + len(unlisted) + len(unhashed))
    return Verified(result, {os.path.realpath(path) for path in matched}, basis)


def unlisted_files(folder, dist_info, files, listed, records, vendor):
    """Files in the top-level folders a distribution installs into that are not its own. In a
    regular package of the vendor set (its __init__.py listed by vendor distributions alone)
    and in the dist-info folder, every file must be listed by a vendor distribution; in a
    folder others share (a namespace such as nvidia/, a .libs folder), by some distribution.
    A cached .pyc of a listed source is Python's own, unless Python would run it without
    reading that source (an unchecked-hash .pyc, PEP 552)."""
    tops = {os.path.relpath(path, folder).split("/")[0] for path in files if os.path.dirname(path) != folder}
    found = []
    for top in sorted(tops | {dist_info}):
        if top.startswith(".."):
            continue
        root = folder + "/" + top
        owners = records.owners(root + "/__init__.py")
        owned = top == dist_info or (bool(owners) and all(owner in vendor for owner in owners))
        for path in files_under(root):
            if path in listed:
                continue
            if cached(path, listed):
                if unchecked_pyc(path):
                    found.append(path[len(folder) + 1:] + " (an unchecked-hash .pyc: Python runs it without "
                                                          "reading its source)")
                continue
            owner = records.owner_of(path)
            if owner is None or (owned and owner not in vendor):
                found.append(path[len(folder) + 1:] + (" (installed by %s)" % owner if owner else ""))
    return found


def files_under(root):
    """Every file below `root`, and every link to a folder (not followed)."""
    pending = [root]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    yield entry.path


def cached(path, listed):
    """A __pycache__ file of a listed source (`mod.cpython-310.pyc` for `mod.py`), or the file
    Python writes one through (`mod.cpython-310.pyc.NNN`, renamed into place at once: what a
    probe beside this one leaves for an instant while it compiles; Python never runs it:
    _write_atomic in Lib/importlib/_bootstrap_external.py, https://github.com/python/cpython)."""
    parent, _, name = path.rpartition("/")
    stem, _, digits = name.rpartition(".")
    written = stem.endswith(".pyc") and digits.isdigit()
    if not parent.endswith("/__pycache__") or not (name.endswith(".pyc") or written):
        return False
    return parent[: -len("__pycache__")] + name.split(".")[0] + ".py" in listed


def unchecked_pyc(path):
    """A hash-based .pyc whose check_source flag is off: its header's flags word (PEP 552)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(8)
    except OSError:
        return False
    flags = int.from_bytes(header[4:8], "little") if len(header) == 8 else 0
    return bool(flags & 1) and not flags & 2


def recorded_names(path):
    """The distributions an install recorded in vendor.json: its vendor builds and companions."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        names = list(data.get("installed", {}))
        names += [companion["name"] for companion in data.get("companions", [])]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return []
    return [name for name in names if isinstance(name, str)]


def argument(argv, option):
    return argv[argv.index(option) + 1] if option in argv[:-1] else None


def main(argv):
    hash_files = "--hash" in argv
    record, manifest_file = argument(argv, "--record"), argument(argv, "--manifest")
    accounts = json.loads(sys.stdin.read() or "{}") if argument(argv, "--ran") == "-" else None
    layout = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site_layout.py"))
    folders, user = layout["site_folders"]()
    records = Records(folders)
    manifest = read_manifest(manifest_file) if manifest_file else None
    hooks = start_up_hooks(folders, user, records)
    vendor = {normalize(name) for name in STACK + tuple(recorded_names(record) if record else ())} | set(manifest or {})
    distributions, verified = {}, {}
    # hashlib gives up the GIL while it hashes a large buffer, so files hash side by side.
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for key in sorted(vendor):
            if key in records.dists:
                verified[key] = verify(key, records, (manifest or {}).get(key), vendor, hash_files, pool)
                distributions[key] = verified[key].result
            elif key not in STACK:
                distributions[key] = {"installed": False, "version": None, "record": False, "basis": None,
                                      "reason": None, "expected": 0, "verified": 0, "files": 0, "bytes": 0,
                                      "changed": [], "missing": [], "unlisted": [], "unhashed": [], "problems": 1}
    ran = Ran(folders, records, manifest, verified, vendor, hash_files).report(accounts) \
        if accounts is not None else None
    print(json.dumps({
        "probe": "integrity",
        "hashed": hash_files,
        "site_dirs": folders,
        "manifest": manifest is not None,
        "vendor": sorted(vendor),
        "hooks": hooks,
        "distributions": distributions,
        "ran": ran,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
