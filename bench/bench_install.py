"""The install's cost against doing the same by hand, on loopback indexes of stub wheels.

Measures, in one run and with one warm uv cache:
  * cold install: `jetson-install obliteratus` vs the same uv commands typed by hand;
  * no-op re-run: `jetson-install obliteratus` again vs re-running the uv install by hand;
  * the no-op re-run for every kind of source: a plain folder (after a build wrote into it),
    a git checkout, a git URL at a branch (one `git ls-remote`) and at a tag;
  * cold install vs a pip recipe following NVIDIA's documented steps (python -m venv,
    pip install numpy, pip install the torch wheel, then the project under constraints);
  * cold install vs uv by hand, then the same proof by hand: the probe scripts the install's
    verify step runs (torch, bitsandbytes, the vendor files' integrity), once each, one after
    another, in the new environment;
  * with --before REV, the no-op re-run of every kind of source against the tool at that git
    revision (a checkout of it for this run, its own catalog), in CPU seconds as well as wall.
With --real-deps the public packages come from uv's default index instead of the loopback one:
the real OBLITERATUS dependency tree (transformers, datasets, pandas, scikit-learn, matplotlib
and the rest, at real wheel sizes), with the stub vendor builds standing in for the Jetson torch
(--real-torch gives them the real CPU torch's native files). uv's cache is warmed first, so the
figures compare what each does with the cache, not the download.

Goals (issue 45): a cold install with the real dependency tree at most 1.05x the same uv commands
by hand for the part uv by hand also does, and at most 1.2x uv by hand then the same proof by hand;
a no-op re-run at most 1.0x uv by hand's wall time for every kind of source, and its CPU back to
the tool's of a week before (--before REV).

Run by hand from the repository root:
    .venv/bin/python bench/bench_install.py [--repeat N] [--real-deps] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))

from support import PROXY_VARIABLES, VENDOR_PINS, find_uv, isolated_env  # noqa: E402
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import build_index_dirs, make_obliteratus_git_repo, make_obliteratus_source  # noqa: E402

from jetson_install.envs.manifest import manifest_path  # noqa: E402
from jetson_install.envs.record import record_path  # noqa: E402
from jetson_install.probes import integrity_command, probe_command  # noqa: E402


class Sample(NamedTuple):
    wall: float
    cpu: float  # user + system seconds of every process it started: far steadier than wall on a shared machine


def timed(commands: Sequence[Sequence[str]], env: Dict[str, str],
          steps: Optional[List[Dict[str, float]]] = None, cwd: Optional[Path] = None) -> Sample:
    """Wall and CPU seconds of `commands`; for one install with --json, its steps' seconds go to
    `steps`, with "outside steps" for the rest (start-up, the checks before the first step, the no-op test)."""
    start, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    for argv in commands:
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        if done.returncode != 0:
            raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr}")
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if steps is not None:
        result = {step["id"]: step["seconds"] for step in json.loads(done.stdout)["steps"]}
        result["outside steps"] = seconds - sum(result.values())
        steps.append(result)
    return Sample(seconds, after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)


def bench_env(work: Path, real_deps: bool) -> Dict[str, str]:
    """The tests' isolated environment; with the real dependency tree, without the dead proxy it
    sets so that nothing leaves loopback by mistake."""
    env = isolated_env(work)
    if real_deps:
        for name in PROXY_VARIABLES:
            env.pop(name, None)
    return env


def compared(what: str, tool: List[Sample], other: List[Sample], other_name: str) -> str:
    """One line: the medians of both, and the median of their ratios pair by pair (each sample
    of `tool` beside the one of `other` taken next to it), in wall and in CPU seconds."""
    wall, other_wall = statistics.median(s.wall for s in tool), statistics.median(s.wall for s in other)
    cpu, other_cpu = statistics.median(s.cpu for s in tool), statistics.median(s.cpu for s in other)
    wall_ratio = statistics.median(a.wall / b.wall for a, b in zip(tool, other))
    cpu_ratio = statistics.median(a.cpu / b.cpu for a, b in zip(tool, other))
    return (f"{what:21} jetson-install {wall:6.2f}s   {other_name} {other_wall:6.2f}s   ratio {wall_ratio:4.2f}x "
            f"(CPU {cpu:5.2f}s vs {other_cpu:5.2f}s: {cpu_ratio:4.2f}x)")


def before_checkout(revision: str, work: Path, vendor_dir: Path) -> Tuple[Path, Path]:
    """The tool at `revision`, checked out for this run and compiled as an installed wheel is, and
    the stub catalog its own test support makes from its own wheels-index.toml."""
    folder = work / "before"
    subprocess.run(["git", "-C", str(TOP), "worktree", "add", "--detach", "-q", str(folder), revision], check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder / "jetson_install")], check=True)
    catalog = work / "before-wheels-index.toml"
    made = ("import sys; sys.path.insert(0, sys.argv[1] + '/tests'); from pathlib import Path; "
            "from support.catalogs import stub_catalog_text; "
            "print(stub_catalog_text(Path(sys.argv[1], 'wheels-index.toml').read_text(), Path(sys.argv[2])), end='')")
    catalog.write_text(subprocess.run([sys.executable, "-c", made, str(folder), str(vendor_dir)], check=True,
                                      capture_output=True, text=True, cwd=folder).stdout)
    return folder, catalog


def proof_by_hand(python: Path, recorded: Path) -> List[List[str]]:
    """The proof the verify step gives, by hand: each probe script it runs, once, one after
    another, by the new environment's python; the integrity probe by size, as an install's is,
    against the record and manifest the tool wrote for the same files (`recorded`: its DIR). A
    probe that finds a failure says so in its output and exits 1 (the stub bitsandbytes has no
    kernels), which the verify step reads and the proof by hand takes as it comes."""
    probes = [probe_command(str(python), "torch"), probe_command(str(python), "bitsandbytes"),
              integrity_command(str(python), str(record_path(recorded)), False, str(manifest_path(recorded)))]
    return [["sh", "-c", '"$@"; exit 0', "sh", *probe] for probe in probes]


def wrote_build_outputs(tree: Path) -> None:
    """What a setuptools build leaves in a source tree, with fresh file times (a CI checkout)."""
    (tree / "obliteratus.egg-info").mkdir(exist_ok=True)
    (tree / "obliteratus.egg-info" / "PKG-INFO").write_text("Name: obliteratus\n")
    for path in tree.rglob("*.py"):
        path.touch()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--real-torch", action="store_true",
                        help="the stub vendor torch carries the real CPU torch's native files (bench_disk.py's set)")
    parser.add_argument("--real-deps", action="store_true",
                        help="the public packages from uv's default index: OBLITERATUS' real dependency tree")
    parser.add_argument("--before", metavar="REV",
                        help="a git revision of the tool whose no-op re-runs to compare with, a week's old")
    args = parser.parse_args()
    # As an installed wheel would be: compiled, not recompiled on every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(TOP / "jetson_install")], check=True)
    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    dirs = build_index_dirs(work / "indexes")
    if args.real_torch:
        from bench_disk import find_torch_wheel, with_native_files

        with_native_files(next(dirs.vendor.glob("torch-*.whl")), find_torch_wheel(None))
    source = make_obliteratus_source(work / "OBLITERATUS")
    env = bench_env(work, args.real_deps)
    catalog = work / "wheels-index.toml"
    # The catalog's jp6-cu126 source describing the stub vendor builds, as the tests make it.
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))
    env.update(JETSON_INSTALL_WHEELS_INDEX=str(catalog))  # isolated_env's XDG_CONFIG_HOME has no config.toml
    # Who re-runs each kind of source: the tool, and with --before the tool at that revision, run
    # from its checkout (`python -m` puts that folder first on the path) with its own catalog.
    runners: Dict[str, Tuple[Dict[str, str], Optional[Path]]] = {"jetson-install": (env, None)}
    if args.before:
        folder, before_catalog = before_checkout(args.before, work, dirs.vendor)
        runners[args.before] = (dict(env, JETSON_INSTALL_WHEELS_INDEX=str(before_catalog)), folder)
    uv = find_uv()
    pins = [f"{name}=={version}" for name, version in VENDOR_PINS.items()]
    constraints = work / "constraints.txt"
    constraints.write_text("\n".join(sorted(pins) + ["numpy<2"]) + "\n")
    requirement = f"obliteratus[quantization] @ {source.as_uri()}"
    repository = make_obliteratus_git_repo(work / "git" / "OBLITERATUS")
    # kind -> (--source, --ref, the requirement uv gets by hand)
    kinds = {
        "folder": (str(source), None, requirement),
        "git checkout": (str(repository), None, f"obliteratus[quantization] @ {repository.as_uri()}"),
        "git branch": (repository.as_uri(), "main", f"obliteratus[quantization] @ git+{repository.as_uri()}@main"),
        "git tag": (repository.as_uri(), "v0.1.3", f"obliteratus[quantization] @ git+{repository.as_uri()}@v0.1.3"),
    }

    # Files kept by uv's cache, as a real index's are: the cold installs below then differ in
    # what each does with the cache, not in downloads.
    with LoopbackIndex(dirs.vendor, name="vendor", cache_files=True) as vendor, \
            LoopbackIndex(dirs.public, name="public", cache_files=True) as public:
        # uv's own default index where the real dependency tree is asked for (never named here).
        default_index = [] if args.real_deps else ["--default-index", public.url]

        def tool(venv: Path, kind: str = "folder") -> List[str]:
            given, ref, _ = kinds[kind]
            return [sys.executable, "-m", "jetson_install", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2",
                    "--venv", str(venv), "--python", sys.executable, "--vendor-index", vendor.url,
                    *default_index, "--source", given, "--no-verify", "--yes", "--json",
                    *(["--ref", ref] if ref else [])]

        def by_hand(venv: Path, create: bool, kind: str = "folder") -> List[List[str]]:
            python = str(venv / "bin" / "python")
            steps = [[uv, "venv", "--seed", "--python", sys.executable, *default_index, str(venv)],
                     [uv, "pip", "install", "--python", python, "--no-deps", "--default-index", vendor.url, *pins]]
            steps = steps if create else []
            return steps + [
                [uv, "pip", "install", "--python", python, "--constraint", str(constraints),
                 *default_index, kinds[kind][2], *pins],
                [uv, "pip", "check", "--python", python],
            ]

        def pip_recipe(venv: Path) -> List[List[str]]:
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--index-url", public.url]
            return [[sys.executable, "-m", "venv", str(venv)],
                    pip + ["numpy==1.26.4"],
                    [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-cache-dir", "--no-deps",
                     "--index-url", vendor.url, *pins],
                    pip + ["-c", str(constraints), str(source) + "[quantization]", *pins]]

        timed([tool(work / "warm-up")], env)  # fills the uv cache
        timed(by_hand(work / "hand-noop", True), env)
        samples: Dict[str, List[Sample]] = {name: [] for name in ("tool", "hand", "hand-proof", "pip", "noop-tool",
                                                                  "noop-hand")}
        cold_steps: List[Dict[str, float]] = []
        # Interleaved, so a slow moment on a busy machine hits every case alike.
        for n in range(args.repeat):
            samples["tool"].append(timed([tool(work / f"tool-{n}")], env, cold_steps))
            samples["hand"].append(timed(by_hand(work / f"hand-{n}", True), env))
            proven = work / f"hand-proof-{n}"
            proof = proof_by_hand(proven / "bin" / "python", work / f"tool-{n}")
            samples["hand-proof"].append(timed(by_hand(proven, True) + proof, env))
            if not args.real_deps:  # pip would download the real tree on every run: minutes, not a comparison
                samples["pip"].append(timed(pip_recipe(work / f"pip-{n}"), env))
            samples["noop-tool"].append(timed([tool(work / "warm-up")], env))
            samples["noop-hand"].append(timed(by_hand(work / "hand-noop", False), env))
        kind_samples = no_op_by_kind(list(kinds), runners, tool, by_hand, work, (source, repository), args.repeat)

    report(args.repeat, samples, cold_steps, kind_samples)
    for folder in (cwd for _, cwd in runners.values() if cwd is not None):
        subprocess.run(["git", "-C", str(TOP), "worktree", "remove", "--force", str(folder)], check=False)
    shutil.rmtree(work, ignore_errors=True)


def no_op_by_kind(kinds: List[str], runners: Dict[str, Tuple[Dict[str, str], Optional[Path]]],
                  tool: Callable[[Path, str], List[str]], by_hand: Callable[[Path, bool, str], List[List[str]]],
                  work: Path, trees: Tuple[Path, Path], repeat: int) -> Dict[Tuple[str, str], List[Sample]]:
    """The no-op re-run of each kind of source by each runner and by uv by hand, interleaved,
    after a build wrote into the source trees (`trees`: the folder and the git checkout)."""
    env = runners["jetson-install"][0]
    for kind in kinds:
        timed(by_hand(work / f"kind-hand-{kind}", True, kind), env)
        for n, (its_env, cwd) in enumerate(runners.values()):
            timed([tool(work / f"kind-{n}-{kind}", kind)], its_env, cwd=cwd)
        for tree in trees:
            wrote_build_outputs(tree)
        for n, (name, (its_env, cwd)) in enumerate(runners.items()):
            if "unchanged" not in subprocess.run(tool(work / f"kind-{n}-{kind}", kind), env=its_env,
                                                 capture_output=True, text=True, cwd=cwd).stdout:
                print(f"{kind}: the re-run of {name} was not a no-op")
    samples: Dict[Tuple[str, str], List[Sample]] = {}
    for _ in range(repeat):
        for kind in kinds:
            samples.setdefault((kind, "uv by hand"), []).append(timed(by_hand(work / f"kind-hand-{kind}", False, kind), env))
            for n, (name, (its_env, cwd)) in enumerate(runners.items()):
                samples.setdefault((kind, name), []).append(timed([tool(work / f"kind-{n}-{kind}", kind)], its_env, cwd=cwd))
    return samples


def report(repeat: int, samples: Dict[str, List[Sample]], cold_steps: List[Dict[str, float]],
           kind_samples: Dict[Tuple[str, str], List[Sample]]) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs); medians of {repeat}")
    print(compared("cold install:", samples["tool"], samples["hand"], "uv by hand"))
    print(compared("cold install:", samples["tool"], samples["hand-proof"], "uv by hand, then the proof by hand"))
    print(compared("no-op re-run:", samples["noop-tool"], samples["noop-hand"], "uv by hand"))
    if samples["pip"]:
        print(compared("cold install:", samples["tool"], samples["pip"], "pip recipe"))
    # Each kind's re-run against uv by hand, and against the tool at --before where it ran.
    for (kind, name), tool_samples in kind_samples.items():
        if name != "jetson-install":
            print(compared(f"no-op, {kind}:", kind_samples[(kind, "jetson-install")], tool_samples, name))
    cold_tool, cold_hand = (statistics.median(s.wall for s in samples[name]) for name in ("tool", "hand"))
    print(f"cold install, fixed overhead over uv by hand: {cold_tool - cold_hand:+.2f} s; each step (median):")
    for name in cold_steps[0]:
        print(f"  {name:14} {statistics.median(result[name] for result in cold_steps):6.2f} s")
    # What uv by hand also does: the install less its verify step.
    by_hand_part = statistics.median(sample.wall - steps["verify"] for sample, steps in zip(samples["tool"], cold_steps))
    print(f"cold install less its verify step: {by_hand_part:.2f} s, {by_hand_part / cold_hand:4.2f}x uv by hand")


if __name__ == "__main__":
    main()
