"""What ran in the sealed proof, judged file by file, for the integrity probe's `ran` section
(standalone; stdlib only; Python 3.8+; integrity_probe.py runs this file with runpy.run_path,
since -I keeps its own folder off sys.path). Each file inside the environment (its site
folders, its prefix) must be a file a distribution lists and match it; the rest is the
platform the proof ran on, named by path and by the Debian package that installed it where
/var/lib/dpkg/info/*.list says (dpkg(1)).
"""

import glob
import os
import runpy
import sys

# The RECORDs' rows and digests: dist_records.py beside this file, run, as it cannot be imported.
_RECORDS = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_records.py"))
ALGORITHMS, NAMED, located, same_digest = (_RECORDS[name] for name in ("ALGORITHMS", "NAMED", "located", "same_digest"))

#: What the sealed torch probe imports besides the vendor builds (it checks NumPy's version):
#: its dependencies are the stack's too.
SUBJECTS = ("numpy",)
DPKG_LISTS = "/var/lib/dpkg/info/*.list"


def required_by(roots, records):
    """The distributions `roots` require, transitively, by name (markers and extras aside)."""
    found, pending = set(), list(roots)
    while pending:
        key = pending.pop()
        if key in found:
            continue
        found.add(key)
        if key in records.dists:
            pending.extend(records.requirements(key))
    return found


def dpkg_packages(paths):
    """{path: Debian package} for the paths dpkg's file lists name. A merged /usr lists
    /lib/X for what now lies at /usr/lib/X, so both spellings are looked up."""
    spellings = {}
    for path in paths:
        spellings[path] = path
        if path.startswith("/usr/"):
            spellings.setdefault(path[len("/usr"):], path)
    found = {}
    for listing in glob.glob(DPKG_LISTS):
        package = os.path.basename(listing)[: -len(".list")].split(":")[0]
        try:
            with open(listing, encoding="utf-8", errors="surrogateescape") as lines:
                for line in lines:
                    path = spellings.get(line.rstrip("\n"))
                    if path is not None:
                        found.setdefault(path, package)
        except OSError:
            continue
    return found


def held_by(key, manifest):
    """What a measured manifest entry holds: the wheel's files, or a kept stack's as installed."""
    if ((manifest or {}).get(key) or {}).get("kept_from"):
        return "%s's files as the environment was made" % key
    return "%s's wheel" % key


class Ran:
    """What ran in the sealed proof, judged file by file."""

    def __init__(self, folders, records, manifest, verified, vendor, hash_files):
        self.records, self.manifest, self.verified, self.hash_files = records, manifest, verified, hash_files
        self.folders = [(os.path.realpath(folder), folder) for folder in folders]
        layout = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site_layout.py"))
        venv = layout["venv_config"](sys.executable)
        self.prefix = os.path.realpath(venv[0]) if venv else None
        self.interpreter = os.path.realpath(sys.executable)
        self.required = required_by(vendor | set(SUBJECTS), records)
        self.vendor = vendor
        self.artifacts = {}  # real path -> distribution, for every file a measured manifest entry lists
        for key, entry in (manifest or {}).items():
            if key in records.dists and entry.get("measured") and isinstance(entry.get("files"), dict):
                real = os.path.realpath(records.dists[key][0])
                for relative in entry["files"]:
                    self.artifacts[located(real, relative)] = key

    def site_of(self, real):
        for folder, _ in self.folders:
            if real.startswith(folder + "/"):
                return folder
        return None

    def judge(self, real, gone):
        """(distribution, None) for a file accounted for, else (distribution or None, why)."""
        if gone:
            return None, "it was removed or replaced after it was loaded"
        key = self.artifacts.get(real)
        if key is not None:
            if real in self.verified[key].matched:
                return key, None
            return key, "it differs from %s (the manifest's sha256)" % held_by(key, self.manifest)
        owners = sorted({owner for owner, _, _ in self.records.index().get(real, ())})
        if len(owners) > 1:
            return None, "the RECORDs of %s all list it" % ", ".join(owners)
        if not owners:
            return None, "no distribution lists it"
        key = owners[0]
        entry = (self.manifest or {}).get(key) or {}
        if entry.get("measured"):
            return key, "%s's RECORD lists it, and %s does not hold it" % (key, held_by(key, self.manifest))
        same = real in self.verified[key].matched if key in self.verified else self.matches_record(real)
        return key, None if same else "it differs from %s's RECORD" % key

    def matches_record(self, real):
        """A file of a distribution the vendor checks did not cover, against its RECORD row:
        by size, and with --hash by digest."""
        _, hashed, size = self.records.index()[real][0]
        algorithm, _, digest = hashed.partition("=")
        try:
            if size and str(os.stat(real).st_size) != size:
                return False
        except OSError:
            return False
        if not self.hash_files:
            return True
        return algorithm.lower() in ALGORITHMS and bool(digest) and same_digest((real, algorithm.lower(), digest))

    def report(self, accounts):
        """The `ran` section from the sealed probes' `files` lines."""
        paths, made, path_entries = {}, 0, set()
        for account in accounts.values():
            if not isinstance(account, dict):
                continue
            pycache = account.get("pycache")
            path_entries.update(account.get("path") or ())
            listed = [os.path.join(folder, name) for folder, names in (account.get("modules") or {}).items()
                      for name in names]
            for path in listed + list(account.get("mapped") or ()):
                gone = path.endswith(" (deleted)")
                path = path[: -len(" (deleted)")] if gone else path
                if pycache and (path + "/").startswith(pycache.rstrip("/") + "/"):
                    made += 1
                    continue
                real = os.path.realpath(path)
                paths[real] = paths.get(real, False) or gone
        distributions, unaccounted, platform = {}, [], []
        for real, gone in sorted(paths.items()):
            site = self.site_of(real)
            inside = site is not None or (self.prefix is not None and real.startswith(self.prefix + "/"))
            if not inside or real == self.interpreter:
                platform.append(real)
                continue
            key, why = self.judge(real, gone) if site is not None else (None, "it lies in the environment, outside "
                                                                              "its site folders")
            shown = os.path.relpath(real, site) if site is not None else real
            if why is not None:
                unaccounted.append({"path": shown, "why": why})
            elif key is not None:
                entry = distributions.setdefault(key, {
                    "version": self.records.dists[key][2], "files": 0, "vendor": key in self.vendor,
                    "required": key in self.required,
                    "basis": self.verified[key].basis if real in self.artifacts else "record"})
                entry["files"] += 1
        return {
            "probes": sorted(name for name, account in accounts.items() if isinstance(account, dict)),
            "files": len(paths) + made,
            "made": made,
            "environment": len(paths) - len(platform),
            "distributions": distributions,
            "unaccounted": unaccounted[:NAMED],
            "unaccounted_count": len(unaccounted),
            "platform": platform_report(platform, sorted(path_entries, key=len, reverse=True)),
        }


def platform_report(paths, path_entries):
    """The platform's files: each shared object by path, the Python modules by the folder of
    the path they were found on (the standard library's), each with its Debian package."""
    packages = dpkg_packages(paths)
    folders, report = {}, []
    for path in paths:
        entry = next((folder for folder in path_entries if path.startswith(folder.rstrip("/") + "/")), None)
        if entry is not None:
            folders.setdefault(entry, []).append(path)
        else:
            report.append({"path": path, "files": 1, "package": packages.get(path)})
    for folder, found in sorted(folders.items()):
        names = sorted({packages[path] for path in found if path in packages})
        report.append({"path": folder.rstrip("/") + "/", "files": len(found), "package": ", ".join(names) or None})
    return sorted(report, key=lambda entry: entry["path"])
