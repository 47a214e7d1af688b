"""Run by the chosen interpreter as
`python -I -S integrity_probe.py [--hash] [--record FILE] [--manifest FILE] [--ran -]`
(standalone; stdlib only; Python 3.8+): what runs when that interpreter starts, whether the
vendor distributions' files are the ones their wheels held, and what every file that ran in
the sealed proof is.

-I -S: neither the environment's `.pth` files nor `sitecustomize` run in this probe, so none of
them can change what it reports; site_layout.py beside it works out which folders `site`
would read (the venv's from its layout, the user's, the system's), as Lib/site.py does.

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

import base64
import csv
import glob
import hashlib
import importlib.machinery
import json
import os
import re
import runpy
import stat
import sys
from concurrent.futures import ThreadPoolExecutor

STACK = ("torch", "torchvision", "torchaudio", "bitsandbytes")
#: What the sealed torch probe imports besides the vendor builds (it checks NumPy's version):
#: its dependencies are the stack's too.
SUBJECTS = ("numpy",)
#: How many paths of one kind a report names; the count says how many there were.
NAMED = 20
# What `site` executes of a .pth file (Lib/site.py, addpackage).
EXECUTED = ("import ", "import\t")
# Algorithms a RECORD may use: sha256 or stronger (md5 and sha1 are refused by the spec above).
ALGORITHMS = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")
#: What an installer writes into a dist-info folder about the install itself, never a file of
#: the wheel (the spec above; uv_cache.json is uv's).
INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json")
REQUIRES = re.compile(r"^Requires-Dist:\s*([A-Za-z0-9][A-Za-z0-9._-]*)", re.MULTILINE)
DPKG_LISTS = "/var/lib/dpkg/info/*.list"


def normalize(name):
    # PEP 503's rule (packaging.utils.canonicalize_name), for a probe without packaging.
    return re.sub(r"[-_.]+", "-", name).lower()


def digest_of(path, algorithm="sha256"):
    """The digest of a regular file's bytes; OSError for anything else (the open of a FIFO
    would wait for a writer, a device never ends)."""
    digest = hashlib.new(algorithm)
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError("%s is not a regular file" % path)
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest


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


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            return handle.read()
    except OSError:
        return None


def rows_of(text):
    """A RECORD's rows as (path, hash, size), the last two as written ("sha256=...", "123")."""
    rows = []
    for line in text.splitlines():
        # csv only for a quoted path (one with a comma): torch's RECORD has 15 000 lines.
        row = next(csv.reader([line])) if line.startswith('"') else line.rsplit(",", 2)
        if len(row) == 3 and row[0]:
            rows.append(row)
    return rows


def located(folder, relative):
    """A path a RECORD or manifest names relative to site-packages, made absolute."""
    return os.path.normpath(os.path.join(folder, relative))


class Records:
    """Every distribution in the site folders, its RECORD kept as text: a distribution's rows
    are parsed when its files are verified, or when what ran is looked up (the index)."""

    def __init__(self, folders):
        self.dists = {}  # normalized name -> (site folder, dist-info folder, version, RECORD text or None)
        for folder in folders:
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                # An .egg-info (a setup.py install) has no RECORD: its files cannot be verified.
                if not name.endswith((".dist-info", ".egg-info")):
                    continue
                dist, _, version = name[: -len(".dist-info")].partition("-")
                key = normalize(dist)
                if key not in self.dists:  # an import takes the first on the path; so does importlib.metadata
                    self.dists[key] = (folder, name, version, read_text(os.path.join(folder, name, "RECORD")))
        self._index = None

    def owners(self, path):
        """The distributions whose RECORD lists `path` (FOLDER/RELATIVE, as RECORD spells it)."""
        found = []
        for key, (folder, _, _, text) in self.dists.items():
            if text is None or not path.startswith(folder + "/"):
                continue
            relative = path[len(folder) + 1:]
            # A row's path starts the text or a line and ends at a comma; csv quotes one with a comma in it.
            if text.startswith(relative + ",") or "\n" + relative + "," in text or '"' + relative + '",' in text:
                found.append(key)
        return found

    def owner_of(self, path):
        found = self.owners(path)
        return found[0] if found else None

    def index(self):
        """Every RECORD row by its file's real path: [(distribution, hash, size)]."""
        if self._index is None:
            self._index = {}
            for key, (folder, _, _, text) in self.dists.items():
                real = os.path.realpath(folder)
                for relative, hashed, size in rows_of(text or ""):
                    self._index.setdefault(located(real, relative), []).append((key, hashed, size))
        return self._index

    def requirements(self, key):
        """The names `key`'s METADATA requires (every Requires-Dist, whatever its marker)."""
        folder, dist_info, _, _ = self.dists[key]
        text = read_text(os.path.join(folder, dist_info, "METADATA")) or ""
        return [normalize(name) for name in REQUIRES.findall(text.split("\n\n", 1)[0])]


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


def same_digest(task):
    """Whether a file's digest is the expected one: hex (a manifest's) or urlsafe base64,
    unpadded (a RECORD's)."""
    path, algorithm, expected = task
    try:
        digest = digest_of(path, algorithm)
    except OSError:
        return False
    if len(expected) == 2 * digest.digest_size and re.fullmatch("[0-9a-f]+", expected):
        return digest.hexdigest() == expected
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii") == expected.rstrip("=")


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
    """A __pycache__ file of a listed source (`mod.cpython-310.pyc` for `mod.py`)."""
    parent, _, name = path.rpartition("/")
    if not parent.endswith("/__pycache__") or not name.endswith(".pyc"):
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
