"""The one registry shape (`plstitch_eval/registry.py`): lazy built-ins, entry points of installed packages
(a real `*.dist-info` on sys.path, read by importlib.metadata), duplicates refused naming both packages (a
plugin module run as `python -m` registers once), a broken plugin one warning line (one line at 40 columns
too), a stable listing order and close matches."""

from __future__ import annotations

import logging
import os
import runpy
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.registry import SHIPPED_PACKAGE, Registry, plugin_entry_points

GROUP = "plstitch.test-things"


def install_fake_package(
    site: Path, dist: str, module: str, source: str, entry_points: dict[str, str], group: str = GROUP
) -> None:
    """A package as pip leaves it: `module.py` and `<dist>-1.0.dist-info/` (METADATA, entry_points.txt)."""
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    lines = [f"[{group}]", *(f"{name} = {target}" for name, target in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "top_level.txt").write_text(module + "\n", encoding="utf-8")


THINGS: Registry[str] | None = None


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("fake_plugin")]:
            del sys.modules[name]


def make_registry() -> Registry[str]:
    global THINGS
    loaded = []

    def builtins() -> None:
        loaded.append(True)
        THINGS.register("alpha", "A", place=0, package=SHIPPED_PACKAGE)
        THINGS.register("beta", "B", place=1, package=SHIPPED_PACKAGE)

    THINGS = Registry("thing", GROUP, builtins, adopt=lambda obj: THINGS.register(obj, obj.upper()))
    THINGS.loaded_builtins = loaded  # type: ignore[attr-defined]
    return THINGS


def test_builtins_load_on_first_use_and_list_in_place_order() -> None:
    things = make_registry()
    assert things.loaded_builtins == []  # type: ignore[attr-defined]  # nothing at construction
    things.register("gamma", "G")  # another package's entry: the shipped ones first, so a clash names them
    assert things.loaded_builtins == [True]  # type: ignore[attr-defined]
    assert things.names() == ["alpha", "beta", "gamma"] and list(things) == things.names()
    assert things.loaded_builtins == [True]  # type: ignore[attr-defined]  # once
    assert things["beta"] == "B" and "gamma" in things and len(things) == 3


def test_a_taken_name_is_refused_naming_both_packages() -> None:
    things = make_registry()
    with pytest.raises(ConfigError, match="Thing 'alpha' is already registered, by package 'plstitch'; "
                       "package 'tests' registers it again: rename one of them."):  # fmt: skip
        things.register("alpha", "other")
    things.register("alpha", things["alpha"])  # the same entry again: no change, no error
    assert things.package("alpha") == SHIPPED_PACKAGE


def test_unknown_names_get_close_matches_in_one_line() -> None:
    things = make_registry()
    with pytest.raises(
        ConfigError, match=r"^Unknown thing 'alpah'\. Did you mean 'alpha'\? Known: alpha, beta\.$"
    ):
        things.lookup("alpah")
    with pytest.raises(ConfigError, match=r"^Unknown --thing 'zzz'\. Known: alpha, beta\.$"):
        things.lookup("zzz", "thing")


def test_plugins_register_through_entry_points_and_name_their_package(site: Path) -> None:
    install_fake_package(
        site,
        "fake-plugin-good",
        "fake_plugin_good",
        """
        from tests.eval import test_registry
        test_registry.THINGS.register("delta", "D")
        """,
        {"delta": "fake_plugin_good", "epsilon": "fake_plugin_good:NAME"},
    )
    (site / "fake_plugin_good.py").write_text(
        (site / "fake_plugin_good.py").read_text() + 'NAME = "epsilon"\n', encoding="utf-8"
    )
    assert [ep.name for ep in plugin_entry_points(GROUP)] == ["delta", "epsilon"]
    things = make_registry()
    assert things.names() == ["alpha", "beta", "delta", "epsilon"]  # the object form is adopted
    assert things.package("delta") == things.package("epsilon") == "fake-plugin-good"
    assert things["epsilon"] == "EPSILON" and things.package("alpha") == SHIPPED_PACKAGE


def test_a_broken_plugin_is_one_warning_and_the_rest_works(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="plstitch")
    broken = "raise ImportError('no torch here')\n"
    install_fake_package(
        site, "fake-plugin-broken", "fake_plugin_broken", broken, {"broken": "fake_plugin_broken"}
    )
    install_fake_package(
        site,
        "fake-plugin-clash",
        "fake_plugin_clash",
        """
        from tests.eval import test_registry
        test_registry.THINGS.register("alpha", "not the shipped one")
        """,
        {"clash": "fake_plugin_clash"},
    )
    things = make_registry()
    assert things.names() == ["alpha", "beta"] and things["alpha"] == "A"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)
    assert "thing plugin 'broken' of package 'fake-plugin-broken'" in warnings[0]
    assert "no torch here" in warnings[0] and "--debug shows the traceback" in warnings[0]
    assert "'alpha' is already registered, by package 'plstitch'; package 'fake-plugin-clash'" in warnings[1]
    assert set(things.failed) == {"broken", "clash"}
    tracebacks = [r for r in caplog.records if r.exc_info]  # at debug level, for --debug
    assert len(tracebacks) == 2


def test_an_entry_deleted_and_set_again_keeps_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """`monkeypatch.delitem` / `setitem` undo by item assignment: the entry comes back where it was listed."""
    things = make_registry()
    with monkeypatch.context() as patch:
        patch.delitem(things, "alpha")
        assert things.names() == ["beta"]
        patch.setitem(things, "beta", "B2")  # replaced in place
        assert things.names() == ["beta"] and things["beta"] == "B2"
    assert things.names() == ["alpha", "beta"] and things["beta"] == "B"
    assert things.package("alpha") == SHIPPED_PACKAGE


def test_a_broken_plugins_warning_is_one_line_at_40_columns(site: Path) -> None:
    """Rich wraps log lines to the terminal; the plugin warning is printed unwrapped, whole on one line."""
    install_fake_package(
        site,
        "fake-plugin-narrow",
        "fake_plugin_narrow",
        "raise ImportError('this plugin needs a library that is not installed here')\n",
        {"narrow": "fake_plugin_narrow"},
        group="plstitch.datasets",
    )
    env = {**os.environ, "COLUMNS": "40", "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "plstitch_eval", "datasets"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "narrow" in line]
    assert len(warned) == 1, done.stderr
    assert warned[0].startswith("warning: dataset plugin 'narrow' of package 'fake-plugin-narrow'")
    assert warned[0].endswith("is not installed here (--debug shows the traceback)")
    assert "cholec80" in done.stdout  # the rest works


TWICE = """
from tests.eval import test_registry


class Twice:
    \"\"\"One definition that registers itself where it is defined.\"\"\"


test_registry.THINGS.register("twice", Twice)
"""


def test_a_plugin_module_run_as_a_script_registers_once(site: Path) -> None:
    """`python -m module` runs the file as `__main__`, and the registry's entry point imports it under its own
    name: the same definition twice from one file and line is one registration, the module's own."""
    install_fake_package(
        site, "fake-plugin-twice", "fake_plugin_twice", TWICE, {"twice": "fake_plugin_twice"}
    )
    things = make_registry()
    script = runpy.run_module(
        "fake_plugin_twice", run_name="__main__"
    )  # loads the entry points while it runs
    module = sys.modules["fake_plugin_twice"]
    assert script["Twice"] is not module.Twice  # two copies of one definition
    assert things.names() == ["alpha", "beta", "twice"] and things.failed == {}
    assert things["twice"] is module.Twice and things.package("twice") == "fake-plugin-twice"


def test_a_script_run_first_gives_way_to_the_module_itself(site: Path) -> None:
    (site / "fake_plugin_solo.py").write_text(TWICE.replace("twice", "solo"), encoding="utf-8")
    things = make_registry()
    things.load()
    runpy.run_module("fake_plugin_solo", run_name="__main__")
    assert things.package("solo") == "__main__"
    import fake_plugin_solo  # imported here: the test is the order of the two runs

    assert things["solo"] is fake_plugin_solo.Twice and things.package("solo") == "fake_plugin_solo"


def test_two_definitions_of_one_name_in_one_file_are_still_refused(site: Path) -> None:
    double = TWICE + "\n\nclass Other:\n    pass\n\n\ntest_registry.THINGS.register('twice', Other)\n"
    (site / "fake_plugin_double.py").write_text(double, encoding="utf-8")
    make_registry()
    with pytest.raises(ConfigError, match="'twice' is already registered, by package 'fake_plugin_double'"):
        import fake_plugin_double  # noqa: F401
