"""requirements.lock: read it, check that it agrees with pyproject.toml and environment.yml on every
supported Python, and that an installed environment equals it.

    python tools/lockfile.py check requirements.lock   # the lock, then the running environment (pip freeze)
    python tools/lockfile.py pins requirements.lock    # name==version for the running interpreter

`make install` runs `check` after installing, so an environment that is not the lock never passes for one.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("3.11", "3.12", "3.13")
EXTRAS = ("test", "book")
# Installed by `python -m venv` itself rather than from the lock; `pip freeze` leaves them out of the
# comparison. (setuptools and wheel are in the lock: the editable install builds with them.)
NOT_LOCKED = {"pip"}


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self, env: dict[str, str]) -> bool:
        return self.marker is None or self.marker.evaluate(env)


def read(path: Path) -> list[Pin]:
    """The lock's pins; a line that is not `name==version [; marker]` with hashes is an error."""
    text = path.read_text().replace("\\\n", " ")
    pins = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *hashes = (part.strip() for part in line.split("--hash="))
        req = Requirement(spec)
        specifiers = list(req.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            raise ValueError(f"{path}: entry {number} ({spec!r}) is not pinned with ==; regenerate it with `make lock`")
        pins.append(Pin(canonicalize_name(req.name), specifiers[0].version, req.marker, tuple(hashes)))
    return pins


def environment(python: str | None = None) -> dict[str, str]:
    """Marker environment of this machine, or of it with another Python version (x.y)."""
    env = default_environment()
    if python:  # a recent patch release of it (the lock's floor is 3.11.5, `make lock`)
        env |= {"python_version": python, "python_full_version": f"{python}.9"}
    return env


def resolved(pins: list[Pin], env: dict[str, str]) -> dict[str, str]:
    """name → version for the pins whose markers hold in `env`; two pins of one name is an error."""
    out: dict[str, str] = {}
    for pin in pins:
        if pin.applies(env):
            if pin.name in out:
                raise ValueError(f"the lock pins {pin.name} twice for Python {env['python_version']}")
            out[pin.name] = pin.version
    return out


def requirements(project: dict, extras: tuple[str, ...]) -> list[Requirement]:
    """pyproject.toml's dependencies with those of `extras`, each once; an extra that names the project
    itself (`attention-priors[train]` in `test`) stands for that extra's own requirements."""
    me, out, seen = canonicalize_name(project["name"]), [], set()

    def add(reqs: list[str]) -> None:
        for text in reqs:
            req = Requirement(text)
            if canonicalize_name(req.name) == me:
                for extra in sorted(req.extras - seen):
                    seen.add(extra)
                    add(project["optional-dependencies"][extra])
            elif str(req) not in {str(r) for r in out}:
                out.append(req)

    add(project["dependencies"])
    for extra in extras:
        if extra not in seen:
            seen.add(extra)
            add(project["optional-dependencies"][extra])
    return out


def lock_problems(pins: list[Pin], root: Path = ROOT) -> list[str]:
    """Disagreements of the lock with pyproject.toml and environment.yml, one sentence each."""
    fix = "; run `make lock`"
    problems = [f"{p.name}=={p.version} has no --hash{fix}" for p in pins if not p.hashes]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = requirements(project, EXTRAS)
    for python in SUPPORTED:
        env = environment(python)
        if project.get("requires-python") and Version(env["python_full_version"]) not in \
                Requirement(f"python{project['requires-python']}").specifier:
            problems.append(f"pyproject.toml's requires-python excludes Python {python}, which the lock supports"
                            "; widen it or drop that Python from tools/lockfile.py's SUPPORTED")
        try:
            versions = resolved(pins, env)
        except ValueError as err:
            problems.append(f"{err}{fix}")
            continue
        for req in wanted:
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            got = versions.get(canonicalize_name(req.name))
            if got is None:
                problems.append(f"{req.name} is missing from the lock for Python {python}{fix}")
            elif not req.specifier.contains(got, prereleases=True):
                problems.append(f"the lock's {req.name}=={got} does not satisfy pyproject.toml's "
                                f"{req.name}{req.specifier} on Python {python}{fix}")
    return problems + _conda_problems(root)


def _conda_problems(root: Path) -> list[str]:
    env = yaml.safe_load((root / "environment.yml").read_text())
    deps = env["dependencies"]
    pythons = [d for d in deps if isinstance(d, str) and d.startswith("python")]
    pip = next((d["pip"] for d in deps if isinstance(d, dict) and "pip" in d), [])
    out = []
    if len(pythons) != 1 or pythons[0].split("=")[-1] not in SUPPORTED:
        out.append(f"environment.yml must name one supported python ({', '.join(SUPPORTED)}), not {pythons}")
    if pip != ["-r requirements.lock"]:
        out.append(f"environment.yml's pip section must be exactly '-r requirements.lock' (it is {pip})")
    return out


def installed() -> dict[str, str]:
    """name → version of every distribution in the running environment but the editable project."""
    out = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
                         capture_output=True, text=True, check=True).stdout
    pairs = (line.split("==", 1) for line in out.splitlines() if "==" in line)
    return {canonicalize_name(name): version for name, version in pairs}


def environment_problems(locked: dict[str, str], have: dict[str, str]) -> list[str]:
    """How an installed environment differs from the lock's pins for it."""
    have = {k: v for k, v in have.items() if k not in NOT_LOCKED}
    out = [f"{name} {have[name]} is installed but the lock says {locked[name]}"
           for name in sorted(locked.keys() & have.keys()) if locked[name] != have[name]]
    out += [f"{name}=={locked[name]} is in the lock but not installed" for name in sorted(locked.keys() - have.keys())]
    out += [f"{name}=={have[name]} is installed but not in the lock" for name in sorted(have.keys() - locked.keys())]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("check", "pins"):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    pins = read(path)
    locked = resolved(pins, environment())
    if argv[0] == "pins":
        print("\n".join(f"{name}=={version}" for name, version in sorted(locked.items())))
        return 0
    problems = lock_problems(pins)
    problems += [f"this environment ({sys.prefix}): {p}" for p in environment_problems(locked, installed())]
    for problem in problems:
        print(f"lockfile: {problem}", file=sys.stderr)
    if not problems:
        print(f"lockfile: {path} agrees with pyproject.toml and environment.yml on Python "
              f"{', '.join(SUPPORTED)}; this environment equals its {len(locked)} pins")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
