"""Run by the environment's interpreter (standalone; stdlib only; Python 3.8+): each project
--with or `add` put on the stack, found by the requirement that asked for it, and whether its
top-level modules import. A project names them in its installed metadata: top_level.txt, else
the top-level packages and modules its RECORD lists. Importing them is what a user does first;
a system library the project (or what it imports) loads and the board lacks fails here, with
the loader's message (`libGL.so.1: cannot open shared object file`).

Usage: additions_probe.py REQUIREMENT...  (a name with its version and extras, a URL, or a
project folder, as the install gave them to uv).

Prints one JSON line: {"probe": "additions", "python": ..., "additions": [{"requirement",
"distribution", "version", "modules", "module", "error"}]}: `module` is the first module that
failed to import and `error` its exception's last line (None when every one imported); a
`distribution` of None with no error: a URL or folder whose installed project was not found.
"""

import json
import os
import re
import sys
import traceback

# PEP 508's name at the start of a requirement (https://peps.python.org/pep-0508/#names).
_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def normalize(name):
    # PEP 503's rule: the probe runs on the target's interpreter, which need not have packaging.
    return re.sub(r"[-_.]+", "-", name).lower()


def source_key(url):
    """A URL or folder as uv records it in direct_url.json: without git+, the ref, a trailing
    .git or slash, or credentials; a folder as its file:// URL."""
    if "://" not in url:
        return "file://" + os.path.realpath(os.path.expanduser(url))
    if url.startswith("git+"):
        url = url[len("git+"):]
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    host = host.rsplit("@", 1)[-1]
    path = path.split("#", 1)[0]
    if scheme != "file" and "@" in path:
        path = path.rsplit("@", 1)[0]
    path = path.rstrip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    return "%s://%s%s%s" % (scheme, host, slash, path)


def direct_url(distribution):
    try:
        data = json.loads(distribution.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    url = data.get("url") if isinstance(data, dict) else None
    return source_key(url) if isinstance(url, str) else None


def find(requirement, distributions):
    """The installed distribution the requirement asked for, or None."""
    text = requirement.strip()
    if " @ " in text:
        wanted_name, url = text.split(" @ ", 1)
        return find(wanted_name, distributions) or find(url.strip(), distributions)
    local = text.startswith((".", "/", "~"))
    if "://" in text or local:
        key = source_key(text)
        for distribution in distributions:
            if direct_url(distribution) == key:
                return distribution
        return None
    match = _NAME.match(text)
    if match is None:
        return None
    wanted = normalize(match.group(1))
    for distribution in distributions:
        if normalize(distribution.metadata["Name"] or "") == wanted:
            return distribution
    return None


def top_level(distribution):
    """The importable names the distribution installs: top_level.txt, else its RECORD's
    top-level packages and modules (private ones, scripts and data left out)."""
    listed = distribution.read_text("top_level.txt")
    if listed:
        names = [line.strip().replace("/", ".") for line in listed.splitlines()]
    else:
        names = []
        for path in distribution.files or ():
            parts = str(path).replace("\\", "/").split("/")
            first = parts[0]
            if first in ("..", "") or first.endswith((".dist-info", ".data", ".egg-info")) or first == "__pycache__":
                continue
            if len(parts) > 1:
                names.append(first)
            elif first.endswith(".py"):
                names.append(first[: -len(".py")])
            elif first.endswith((".so", ".pyd")):
                names.append(first.split(".", 1)[0])
    found = []
    for name in names:
        head = name.split(".", 1)[0]
        if name and head.isidentifier() and not head.startswith("_") and name not in found:
            found.append(name)
    return found


def last_line(exc):
    lines = [line for line in traceback.format_exception_only(type(exc), exc) if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def main(requirements):
    from importlib import import_module, metadata

    distributions = list(metadata.distributions())
    results = []
    for requirement in requirements:
        distribution = find(requirement, distributions)
        entry = {"requirement": requirement, "distribution": None, "version": None, "modules": [],
                 "module": None, "error": None}
        results.append(entry)
        if distribution is None:
            # By name, uv installed it or failed: its absence is an error. By URL or folder, the
            # installed project is found through its direct_url.json, which a future uv may
            # write otherwise: not finding it is said, never taken for a failed import.
            by_name = "://" not in requirement and not requirement.strip().startswith((".", "/", "~"))
            entry["error"] = "not installed in this environment" if by_name else None
            continue
        entry["distribution"] = distribution.metadata["Name"]
        entry["version"] = distribution.version
        entry["modules"] = top_level(distribution)
        for module in entry["modules"]:
            try:
                import_module(module)
            except BaseException as exc:  # an import may raise anything, SystemExit included
                entry["module"], entry["error"] = module, last_line(exc)
                break
    # On a line of its own: a module imported above may have written to stdout without a newline.
    sys.stdout.write("\n" + json.dumps({"probe": "additions", "python": "%d.%d" % sys.version_info[:2],
                                        "additions": results}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    # Without waiting for threads an imported module started and never ends.
    os._exit(main(sys.argv[1:]))
