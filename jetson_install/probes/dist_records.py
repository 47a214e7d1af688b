"""The distributions in an interpreter's site folders as their RECORDs and METADATA say, and a
file's digest against the one a RECORD or a manifest gives (standalone; stdlib only; Python
3.8+; packaging is not there to ask). integrity_probe.py and what_ran.py run this file with
runpy.run_path, since -I keeps their own folder off sys.path.

A RECORD is PEP 376's (https://packaging.python.org/en/latest/specifications/recording-installed-packages/):
one row a file, its path relative to the site folder, its hash as `ALGORITHM=urlsafe-base64`
and its size.
"""

import csv
import hashlib
import os
import re
import stat

#: How many paths of one kind a report names; the count says how many there were.
NAMED = 20
# Algorithms a RECORD may use: sha256 or stronger (md5 and sha1 are refused by the spec above).
ALGORITHMS = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")
#: What an installer writes into a dist-info folder about the install itself, never a file of the
#: wheel: RECORD, INSTALLER and REQUESTED (the spec above), direct_url.json (PEP 610,
#: https://packaging.python.org/en/latest/specifications/direct-url/), and uv's uv_cache.json
#: (https://github.com/astral-sh/uv, crates/uv-install-wheel).
INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json")
REQUIRES = re.compile(r"^Requires-Dist:\s*([A-Za-z0-9][A-Za-z0-9._-]*)", re.MULTILINE)


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
    import base64  # here: envs/record.py imports this file for INSTALLER_FILES on the no-op path

    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii") == expected.rstrip("=")
