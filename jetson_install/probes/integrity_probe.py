"""Run by the chosen interpreter as `python -I -S integrity_probe.py [--hash] [--record FILE]`
(standalone; stdlib only; Python 3.8+): what runs when that interpreter starts, and whether
the vendor distributions' files are the ones their RECORDs list.

-I -S: neither the environment's `.pth` files nor `sitecustomize` run in this probe, so none of
them can change what it reports; site_layout.py beside it works out which folders `site`
would read (the venv's from its layout, the user's, the system's), as Lib/site.py does.

- Start-up hooks: every `*.pth` file in those folders with a line that `site` executes (one
  that starts with `import` and a space or tab: Lib/site.py, addpackage), and every
  `sitecustomize` and `usercustomize` module on the path `site` builds; each with its sha256,
  the distribution whose RECORD lists it, and, for a `.pth`, the modules its lines import.
- Vendor files: the distributions of the torch stack, those the environment's record names
  (FILE, the install's vendor.json: its `installed` and `companions`) and those that installed
  a hook or a module a hook imports. Each RECORD-listed file is compared by size, and with
  --hash by its digest (PEP 376 RECORD, https://packaging.python.org/en/latest/specifications/recording-installed-packages/);
  files in the folders they install into that they do not list are named.

Prints one JSON line: {"probe": "integrity", "hashed": ..., "site_dirs": [...],
"hooks": [...], "distributions": {...}}.
"""

import base64
import contextlib
import csv
import hashlib
import importlib.machinery
import json
import os
import re
import runpy
import sys
from concurrent.futures import ThreadPoolExecutor

STACK = ("torch", "torchvision", "torchaudio", "bitsandbytes")
#: How many paths of one kind a report names; the count says how many there were.
NAMED = 20
# What `site` executes of a .pth file (Lib/site.py, addpackage).
EXECUTED = ("import ", "import\t")
IMPORTED = re.compile(r"(?:^|[;\s])import\s+([\w.]+(?:\s*,\s*[\w.]+)*)|__import__\(\s*['\"]([\w.]+)['\"]")
# Algorithms a RECORD may use: sha256 or stronger (md5 and sha1 are refused by the spec above).
ALGORITHMS = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")


def normalize(name):
    # PEP 503's rule (packaging.utils.canonicalize_name), for a probe without packaging.
    return re.sub(r"[-_.]+", "-", name).lower()


def digest_of(path, algorithm="sha256"):
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
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
    """(the lines `site` executes, the folders it adds to the path)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return [], []
    executed, added = [], []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith(EXECUTED):
            executed.append(line)
        else:
            folder = os.path.join(os.path.dirname(path), line.rstrip())
            if os.path.isdir(folder):
                added.append(os.path.abspath(folder))
    return executed, added


class Records:
    """Every RECORD in the site folders, kept as text: a distribution's rows are parsed only
    when its files are verified, and who lists a path is looked up in the texts."""

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


def hook_modules(lines, path):
    """The top-level modules a .pth file's executed lines import, each where the path finds it."""
    names = []
    for line in lines:
        for match in IMPORTED.finditer(line):
            for name in (match.group(1) or match.group(2)).split(","):
                top = name.strip().split(".")[0]
                if top and top not in names:
                    names.append(top)
    found = []
    for name in names:
        spec = None
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = spec.origin if spec is not None and spec.has_location else None
        found.append({"name": name, "path": origin})
    return found


def describe_file(entry, records):
    """`entry` with the sha256 of the file at its path and the distribution that lists it."""
    path = entry["path"]
    if path is not None:
        try:
            entry["sha256"] = digest_of(path).hexdigest()
        except OSError:
            entry["sha256"] = None
        entry["distribution"] = records.owner_of(path)
    return entry


def start_up_hooks(folders, user, records):
    found, executed_lines, path = [], [], list(sys.path)
    for folder in folders:
        path.append(folder)
        for pth in pth_files(folder):
            executed, added = read_pth(pth)
            path.extend(added)
            if executed:
                found.append({"kind": "pth", "path": pth})
                executed_lines.append(executed)
    for hook, executed in zip(found, executed_lines):
        hook["modules"] = [describe_file(module, records) for module in hook_modules(executed, path)]
    # `site` imports the first sitecustomize (and, where it adds the user's site, usercustomize)
    # on the path; every one there is named, since removing the first would run the next.
    for kind in ("sitecustomize", "usercustomize") if user else ("sitecustomize",):
        for folder in path:
            spec = importlib.machinery.PathFinder.find_spec(kind, [folder])
            if spec is not None and spec.has_location:
                found.append({"kind": kind, "path": spec.origin})
    return [describe_file(hook, records) for hook in found]


def same_digest(task):
    """Whether a file's digest is the one its RECORD row gives (urlsafe base64, unpadded)."""
    path, algorithm, expected = task
    try:
        digest = digest_of(path, algorithm).digest()
    except OSError:
        return False
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii") == expected.rstrip("=")


def named(paths):
    return sorted(paths)[:NAMED]


def verify(key, records, vendor, hash_files, pool):
    """One distribution's files against its RECORD, and what else lies in the folders it installs into."""
    folder, dist_info, version, text = records.dists[key]
    rows = rows_of(text) if text is not None else []
    result = {"installed": True, "version": version, "record": text is not None, "files": 0, "bytes": 0}
    changed, missing, unhashed, tasks, listed = [], [], [], [], set()
    prefix = folder + "/"
    # What the installer writes about the install itself, not the build's content: some
    # installers list these without a digest (INSTALLER, REQUESTED, direct_url.json in
    # https://packaging.python.org/en/latest/specifications/recording-installed-packages/).
    installer_files = {dist_info + "/" + name for name in ("INSTALLER", "REQUESTED", "direct_url.json")}
    for relative, hashed, size in rows:
        full = prefix + relative
        listed.add(full)
        if "__pycache__/" in relative or relative.startswith(dist_info + "/RECORD"):
            continue  # Python's own cache of a listed source; RECORD cannot list its own digest
        try:
            found = os.stat(full).st_size
        except OSError:
            missing.append(relative)
            continue
        result["files"] += 1
        result["bytes"] += found
        if size and str(found) != size:
            changed.append(relative)
        elif hash_files:
            algorithm, _, digest = hashed.partition("=")
            if algorithm.lower() in ALGORITHMS and digest:
                tasks.append((relative, (full, algorithm.lower(), digest)))
            elif relative not in installer_files:
                unhashed.append(relative)  # its content cannot be compared
    for (relative, _), same in zip(tasks, pool.map(same_digest, [task for _, task in tasks])):
        if not same:
            changed.append(relative)
    unlisted = unlisted_files(folder, dist_info, rows, listed, records, vendor)
    result.update(changed=named(changed), missing=named(missing), unlisted=named(unlisted), unhashed=named(unhashed),
                  problems=len(changed) + len(missing) + len(unlisted) + len(unhashed))
    return result


def unlisted_files(folder, dist_info, rows, listed, records, vendor):
    """Files in the top-level folders a distribution installs into that are not its own. In a
    regular package of the vendor set (its __init__.py listed by vendor distributions alone)
    and in the dist-info folder, every file must be listed by a vendor distribution; in a
    folder others share (a namespace such as nvidia/, a .libs folder), by some distribution."""
    tops = {path[:path.find("/")] for path, _, _ in rows if "/" in path and not path.startswith("..")}
    found = []
    for top in sorted(tops):
        root = folder + "/" + top
        owners = records.owners(root + "/__init__.py")
        owned = top == dist_info or (bool(owners) and all(owner in vendor for owner in owners))
        for path in files_under(root):
            if path in listed or cached(path, listed):
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


def main(argv):
    hash_files = "--hash" in argv
    record = argv[argv.index("--record") + 1] if "--record" in argv[:-1] else None
    layout = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site_layout.py"))
    folders, user = layout["site_folders"]()
    records = Records(folders)
    hooks = start_up_hooks(folders, user, records)
    wanted = [normalize(name) for name in STACK + tuple(recorded_names(record) if record else ())]
    vendor = set(wanted)
    for hook in hooks:
        wanted += [hook.get("distribution")] + [module.get("distribution") for module in hook.get("modules", ())]
    distributions = {}
    # hashlib gives up the GIL while it hashes a large buffer, so files hash side by side.
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for key in wanted:
            if key is None or key in distributions:
                continue
            if key in records.dists:
                distributions[key] = verify(key, records, vendor, hash_files, pool)
            elif key in vendor and key not in STACK:
                distributions[key] = {"installed": False, "version": None, "record": False, "files": 0,
                                      "bytes": 0, "changed": [], "missing": [], "unlisted": [], "unhashed": [],
                                      "problems": 1}
    print(json.dumps({
        "probe": "integrity",
        "hashed": hash_files,
        "site_dirs": folders,
        "vendor": sorted(vendor),
        "hooks": hooks,
        "distributions": distributions,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
