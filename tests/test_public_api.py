"""The public names of `companion` (`__all__`): each resolves to what it names (never a submodule of the same
name), the lazily filled registry arrives filled, and the API page documents every one (the Sphinx extension's
check, which makes the strict build fail on an undocumented name)."""

from __future__ import annotations

import importlib
import pkgutil
import types

import companion
from companion.book.site.sphinxext import undocumented


def test_every_public_name_resolves_to_its_object_even_after_every_submodule_is_imported():
    for m in pkgutil.walk_packages(companion.__path__, "companion."):
        if not m.name.startswith(("companion.book", "companion.cli", "companion.__main__")):
            importlib.import_module(m.name)  # a submodule named like a public name would now shadow it
    for name in companion.__all__:
        obj = getattr(companion, name)
        assert not isinstance(obj, types.ModuleType), f"companion.{name} is a module, not the name it exports"
    assert companion.ensure_runs.__module__ == "companion.sweep"


def test_the_experiment_registry_arrives_filled():
    assert {"gotu-maj3", "charlm", "copymix"} <= set(companion.EXPERIMENTS)


def test_the_api_check_names_what_is_missing_and_nothing_else():
    everything = {f"companion.{n}" for n in companion.__all__}
    assert undocumented(everything) == []
    assert undocumented(everything - {"companion.fastpath_off", "companion.GoatPrior"}) == [
        "companion.GoatPrior", "companion.fastpath_off"]
