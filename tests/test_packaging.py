"""A built wheel runs the default pipeline on its own: the shipped model, card templates and paper numbers.

The wheel is built from a copy of the sources, installed with `pip install --target` into a temp folder and
run from another folder with only that folder on `PYTHONPATH`; the subprocess asserts that every `plstitch_*`
module it imported came from the installed copy, never from the repository (the editable install's finder
comes after `PYTHONPATH` on `sys.meta_path`, and the bootstrap puts the install first on `sys.path`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = "plstitch-tiny-synthetic"
# the quickstart command has no dataset options; the bootstrap shrinks them as tests/test_quickstart.py does
SMALL = {"n_videos": 6, "min_seconds": 8.0, "max_seconds": 12.0}

BOOTSTRAP = """
import json, sys
site = sys.argv.pop(1)
small = json.loads(sys.argv.pop(1))
sys.path.insert(0, site)
import plstitch_eval.quickstart as quickstart

full = quickstart.QuickstartConfig
quickstart.QuickstartConfig = lambda **kw: full(
    **kw, dataset_options=small, linear_epochs=2, timeline_videos=1, num_workers=0
)
from plstitch_eval.cli import main

sys.argv[0] = "plstitch"
try:
    main()
except SystemExit as exc:
    code = exc.code
from plstitch_train.publishing import cards

assert cards.TEMPLATE_PATH.is_file() and cards.load_paper_results()["rows"], cards.MODEL_CARDS_DIR
assert len(list((cards.MODEL_CARDS_DIR / "reference").glob("*.md"))) >= 9
outside = sorted(
    name
    for name, module in sys.modules.items()
    if name.split(".")[0] in ("plstitch_eval", "plstitch_train")
    and getattr(module, "__file__", None)
    and not module.__file__.startswith(site)
)
assert not outside, f"imported from outside the wheel: {outside}"
for path in (cards.TEMPLATE_PATH, cards.PAPER_RESULTS_PATH, quickstart.SHIPPED_DIR):
    assert str(path).startswith(site), path
sys.exit(code)
"""


def _copy_sources(dest: Path) -> Path:
    """Only what the wheel is built from, so the build never writes into the working tree."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("plstitch_eval", "plstitch_train", "model_cards"):
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    return dest


def _pip(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-deps", "--disable-pip-version-check", "-q"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel file, the folder it is installed in with `pip install --target`)."""
    root = tmp_path_factory.mktemp("packaging")
    src = _copy_sources(root / "src")
    dist = root / "dist"
    # the test extra installs setuptools, so the build needs no network; without it pip fetches it
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    _pip("wheel", ".", *isolation, "-w", str(dist), cwd=src)
    (wheel,) = dist.glob("plstitch-*.whl")
    site = root / "site"
    _pip("install", "--target", str(site), str(wheel), cwd=root)
    return wheel, site


def test_wheel_ships_the_model_and_the_card_data(installed_wheel: tuple[Path, Path]) -> None:
    """The top-level model_cards/ folder lands in the wheel as the package `plstitch_eval.model_cards`."""
    wheel, _ = installed_wheel
    names = set(zipfile.ZipFile(wheel).namelist())
    data = (REPO / "model_cards").rglob("*")
    shipped = sorted(
        "plstitch_eval/" + p.relative_to(REPO).as_posix()
        for p in data
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert "plstitch_eval/model_cards/plstitch-tiny-synthetic/model.safetensors" in shipped
    assert "plstitch_eval/model_cards/modelcard_template.md" in shipped
    assert "plstitch_eval/model_cards/paper_results.json" in shipped
    assert not set(shipped) - names, sorted(set(shipped) - names)
    assert not (REPO / "plstitch_eval" / "model_cards").exists()  # one home: the top-level folder


def test_pyproject_lists_every_package() -> None:
    """pyproject.toml names packages one by one (for the model_cards mapping): none may be forgotten."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in ("plstitch_eval", "plstitch_train")
        for init in (REPO / top).rglob("__init__.py")
    }
    assert listed == found | {"plstitch_eval.model_cards"}


def test_installed_wheel_runs_quickstart_from_elsewhere(installed_wheel: tuple[Path, Path], tmp_path) -> None:
    _, site = installed_wheel
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PLSTITCH_DEBUG")
    }
    env.update(
        PYTHONPATH=str(site),
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        PLSTITCH_CACHE=str(tmp_path / "cache"),
        HF_HUB_OFFLINE="1",
        OMP_NUM_THREADS="2",
    )
    out = work / "qs"
    command = [sys.executable, "-c", BOOTSTRAP, str(site), json.dumps(SMALL)]
    command += ["quickstart", "--out", str(out), "--device", "cpu"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "does not exist" not in done.stderr and "Traceback" not in done.stderr

    knn = json.loads((out / "results" / "model" / "knn.json").read_text())
    assert knn["model"]["spec"] == SHIPPED
    weights = Path(knn["model"]["provenance"]["path"])
    assert weights.is_relative_to(site) and weights.name == "model.safetensors"
    assert (out / "results" / "model" / "linear.json").is_file() and (out / "results" / "table.md").is_file()
    assert (out / "figures" / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert len(list((out / "features" / "model").glob("*.safetensors"))) == SMALL["n_videos"]
    assert f"{knn['metrics']['accuracy']:.1f}" in done.stdout  # the results table on stdout
    fresh = json.loads((out / "results" / "random-init" / "knn.json").read_text())["model"]
    assert fresh["spec"] == f"random-init:{SHIPPED}"
    assert Path(fresh["provenance"]["path"]).is_relative_to(site)
    assert (out / "results" / "raw-pixels" / "knn.json").is_file() and "majority class" in done.stdout
