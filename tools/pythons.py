"""Find the Python interpreters this project supports (3.11-3.13) on this machine.

Looks on PATH (python3.11 ... python3.13, then python3), in pyenv's versions (which a pyenv shim on PATH
hides unless that version is selected) and in /usr/bin, /usr/local/bin; an interpreter counts only if it
runs, reports a supported version and can make a venv.

    python3 tools/pythons.py --first         # the interpreter `make` uses for .venv: 3.11 first
    python3 tools/pythons.py --other 3.11    # one of another supported version (the newest), or nothing
    python3 tools/pythons.py                 # every one found, with its version

Runs on any Python 3, so the Makefile can call it before .venv exists.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

SUPPORTED = ("3.11", "3.12", "3.13")


def _version(path: str) -> str | None:
    try:
        # an interpreter that cannot make a venv (Debian's without python3.X-venv) does not count
        out = subprocess.run([path, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    version = out.stdout.strip()
    return version if out.returncode == 0 and version in SUPPORTED else None


def _candidates() -> list[str]:
    names = [f"python{v}" for v in SUPPORTED] + ["python3"]
    found = [shutil.which(n) for n in names]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for v in SUPPORTED:
        found += sorted(glob.glob(os.path.join(root, "versions", f"{v}*", "bin", f"python{v}")), reverse=True)
        found += [os.path.join(d, f"python{v}") for d in ("/usr/bin", "/usr/local/bin")]
    return [p for p in dict.fromkeys(found) if p and os.access(p, os.X_OK)]


def interpreters() -> dict[str, str]:
    """version → the first interpreter found for it, in SUPPORTED order."""
    out: dict[str, str] = {}
    for path in _candidates():
        version = _version(path)
        if version and version not in out:
            out[version] = path
    return {v: out[v] for v in SUPPORTED if v in out}


def main(argv: list[str]) -> int:
    found = interpreters()
    if argv[:1] == ["--first"]:
        if not found:
            print(f"no Python {', '.join(SUPPORTED)} found; install one, or pass PYTHON=... to make",
                  file=sys.stderr)
            return 1
        print(next(iter(found.values())))
    elif argv[:1] == ["--other"] and len(argv) == 2:
        others = [path for version, path in found.items() if version != argv[1]]
        if others:
            print(others[-1])
    elif not argv:
        for version, path in found.items():
            print(version, path)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
