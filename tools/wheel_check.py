"""The wheel installs beside what a reader has: `make wheel-check` builds it and installs it with nothing but
its core dependencies, each at the floor pyproject.toml gives it, into a fresh virtualenv.

    python tools/wheel_check.py --python python3.11 [--uv _build/uv/bin/uv] [--notebook NB] [--out _build/wheel]

Five parts, each timed:
  build     from a copy of the package in OUT/src (nothing is built inside the checkout): the sdist and
            the wheel built from it (`uv build`; without uv, the wheel with `pip wheel`), into OUT/dist;
  venv      a fresh OUT/venv with the given Python;
  install   the wheel and its core dependencies pinned at their floors (`floors`: torch>=2.6 -> torch==2.6.0,
            numpy>=1.26 -> numpy==1.26.0), with uv, else pip;
  contents  no package of an extra came with it (`extra_names`); `companion` imports from the venv's
            site-packages, not from this checkout (run from a folder outside it); the command line says in
            one line that it needs the `train` extra;
  recipes   the code cells tagged `recipe` of the notebook, after its `parameters` cells (`recipes`), run as
            one script, OUT/recipes.py, by the venv's Python from outside the checkout.
Any failure is one line that names it and the fix, and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lockfile import environment, requirements  # noqa: E402  (tools/lockfile.py: markers, self-referencing extras)

ROOT = Path(__file__).resolve().parents[1]
MARK = ".wheel-check"  # in OUT: the folder is this tool's, so it may empty it


class CheckFailed(Exception):
    """One sentence: what failed and what to do."""


def floors(project: dict, env: dict[str, str] | None = None) -> list[str]:
    """`name==floor` for each core dependency whose marker holds in `env`: the lower bound of its `>=`
    (or `==`, `~=`) padded to three parts (torch>=2.6 -> torch==2.6.0). A dependency without one is an error."""
    out = []
    for text in project["dependencies"]:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        lows = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
        if len(lows) != 1:
            raise CheckFailed(f"pyproject.toml's dependency {text!r} has no single floor (>=) to install the wheel "
                              "with; give it one")
        v = Version(lows[0])
        plain = not (v.pre or v.post or v.dev or v.local or v.epoch)
        out.append(f"{req.name}==" + (".".join(map(str, v.release + (0,) * (3 - len(v.release)))) if plain else lows[0]))
    return out


def extra_names(project: dict) -> set[str]:
    """The packages that only the extras bring: every extra's requirements (self-references followed) that
    are not core dependencies, by canonical name."""
    core = {canonicalize_name(r.name) for r in requirements(project, ())}
    every = requirements(project, tuple(project.get("optional-dependencies", {})))
    return {canonicalize_name(r.name) for r in every} - core


def recipes(notebook: dict, name: str = "the notebook") -> str:
    """The script of a notebook's recipes: the source of its code cells tagged `parameters`, then of those
    tagged `recipe`, in order. No recipe cell, or an IPython line (`%`, `!`) in one, is an error."""
    def tagged(tag):
        return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                for c in notebook["cells"] if c["cell_type"] == "code" and tag in c.get("metadata", {}).get("tags", [])]

    cells = tagged("recipe")
    if not cells:
        raise CheckFailed(f"{name} has no code cell tagged `recipe`; tag the cells a reader copies into a model of "
                          "their own (cell metadata tags), or point RECIPES_NB at a notebook that has them")
    for cell in cells:
        magic = next((ln for ln in cell.splitlines() if ln.lstrip().startswith(("%", "!"))), None)
        if magic is not None:
            raise CheckFailed(f"{name}: a recipe cell runs IPython's {magic.strip()!r}, which plain Python cannot; "
                              "write it in Python")
    params = tagged("parameters")
    parts = [f"# parameters of {name}\n" + "\n".join(params)] if params else []
    parts += [f"# recipe {i} of {name}\n{cell}" for i, cell in enumerate(cells, 1)]
    return "\n".join(p.rstrip() + "\n" for p in parts)


def _run(cmd: list, what: str, fix: str, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise CheckFailed(f"{what} failed (exit {out.returncode}, its output above); {fix}")
    return out


def _fresh(out: Path) -> None:
    if out.exists() and any(out.iterdir()) and not (out / MARK).exists():
        raise CheckFailed(f"{out} holds files this check did not make; give it an empty or new --out")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / MARK).write_text("made by tools/wheel_check.py; emptied by each run\n")


def _build(out: Path, uv: Path | None) -> Path:
    """The wheel, built from a copy of the package (the build's own files, egg-info and build/, stay out of the
    checkout): with uv, the sdist and then the wheel from it; with pip, the wheel."""
    src, dist = out / "src", out / "dist"
    shutil.copytree(ROOT / "companion", src / "companion", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    if uv:
        _run([uv, "build", "-q", "--out-dir", dist, src], "building the sdist and wheel with uv", "see pyproject.toml")
    else:
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, src], "building the wheel with pip",
             "see pyproject.toml")
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise CheckFailed(f"the build left {len(wheels)} wheels in {dist}, not one")
    return wheels[0]


PROBE = """import importlib.metadata as m, json, sys, sysconfig, companion
print(json.dumps({"file": companion.__file__, "version": companion.__version__, "purelib": sysconfig.get_paths()["purelib"],
                  "dists": {d.metadata["Name"]: d.version for d in m.distributions()}}))"""


def check(python: str, uv: Path | None, notebook: Path, out: Path) -> dict[str, float]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    nb_name = os.path.relpath(notebook, ROOT) if notebook.is_relative_to(ROOT) else str(notebook)
    if not notebook.is_file():
        raise CheckFailed(f"{nb_name} does not exist; point RECIPES_NB at the notebook whose `recipe` cells to run")
    script = recipes(json.loads(notebook.read_text()), nb_name)  # before any work: a notebook without recipes
    seconds, t = {}, time.monotonic()

    def lap(part):
        nonlocal t
        seconds[part], t = time.monotonic() - t, time.monotonic()
        print(f"wheel-check: {part} {seconds[part]:.1f} s", flush=True)

    _fresh(out)
    wheel = _build(out, uv)
    print(f"wheel-check: built {wheel.name} ({wheel.stat().st_size / 1024:.0f} KiB)")
    lap("build")
    venv = out / "venv"
    if uv:
        _run([uv, "venv", "-q", "--python", python, venv], f"making a virtualenv with {python}", "install that Python")
    else:
        _run([python, "-m", "venv", venv], f"making a virtualenv with {python}", "install that Python's venv module")
    py = venv / "bin" / "python"
    lap("venv")
    version = _run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], "running the venv's Python",
                   "see the error above").stdout.strip()
    pins = floors(project, environment(version))
    install = ([uv, "pip", "install", "-q", "--python", py] if uv else [py, "-m", "pip", "install", "-q"])
    _run(install + [wheel, *pins], f"installing the wheel with {' '.join(pins)}",
         "a floor in pyproject.toml may not install on this Python; raise it")
    lap("install")
    with tempfile.TemporaryDirectory() as away:  # outside the checkout: only the installed package can import
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        probe = json.loads(_run([py, "-c", PROBE], "importing companion from the venv", "see the error above",
                                cwd=away, env=env).stdout)
        dists = {canonicalize_name(k): v for k, v in probe["dists"].items()}
        print("wheel-check: installed " + ", ".join(f"{p.split('==')[0]} {dists.get(canonicalize_name(p.split('==')[0]))}"
                                                    for p in pins) + f" ({len(dists)} distributions in all)")
        extras = sorted(extra_names(project) & dists.keys())
        if extras:
            raise CheckFailed(f"the wheel brought packages of its extras ({', '.join(extras)}); keep them out of "
                              "pyproject.toml's core dependencies")
        if not Path(probe["file"]).is_relative_to(probe["purelib"]):
            raise CheckFailed(f"companion imported from {probe['file']}, not from the venv's {probe['purelib']}")
        if probe["version"] != wheel.name.split("-")[1]:
            raise CheckFailed(f"companion.__version__ is {probe['version']} but the wheel is {wheel.name}")
        cli = subprocess.run([venv / "bin" / "companion", "list"], capture_output=True, text=True, cwd=away, env=env)
        if cli.returncode != 1 or len(cli.stderr.splitlines()) != 1 or "attention-priors[train]" not in cli.stderr:
            raise CheckFailed(f"the command line without the train extra should say so in one line and exit 1; it "
                              f"exited {cli.returncode} with {cli.stderr.strip()[-300:]!r}")
        lap("contents")
        (out / "recipes.py").write_text(script)
        _run([py, out / "recipes.py"], f"the recipes of {nb_name} (_build/wheel/recipes.py)",
             "fix the recipe cells or the package", cwd=away, env=env)
        lap("recipes")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the fresh virtualenv")
    parser.add_argument("--uv", type=Path, help="uv, if installed (else pip builds and installs)")
    parser.add_argument("--notebook", type=Path, default=ROOT / "notebooks" / "11_your_own_model.ipynb")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "wheel")
    args = parser.parse_args(argv)
    uv = args.uv if args.uv and os.access(args.uv, os.X_OK) else None
    start = time.monotonic()
    try:
        seconds = check(args.python, uv, args.notebook.resolve(), args.out.resolve())
    except CheckFailed as err:
        print(f"wheel-check: {err}", file=sys.stderr)
        return 1
    print(f"wheel-check: passed in {time.monotonic() - start:.1f} s ("
          + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()) + f"; with {'uv' if uv else 'pip'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
