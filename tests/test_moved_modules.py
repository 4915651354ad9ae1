"""Old module paths (README, docs, saved code) are aliases: each gives the very module of its new home."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import plstitch_eval
import plstitch_train
from plstitch_eval.utils.moved import MovedModuleFinder

MOVED = {**plstitch_train.MOVED_MODULES, **plstitch_eval.MOVED_MODULES}
# a public name of each old path, as code written against it imports it
PUBLIC_NAME = {
    "plstitch_train.checkpoint": "load_training_checkpoint",
    "plstitch_train.run_dir": "plan_run",
    "plstitch_train.run_log": "RunLog",
    "plstitch_train.run_progress": "RunProgress",
    "plstitch_train.rng": "seed_everything",
    "plstitch_train.signals": "TrainingInterrupted",
    "plstitch_train.progress": "LiveLine",
    "plstitch_train.collapse_monitor": "CollapseMonitor",
    "plstitch_train.knn_monitor": "KNN_EVAL_NAME",
    "plstitch_train.collapse_probe": "probe_checkpoint",
    "plstitch_train.export": "export_model",
    "plstitch_train.cards": "render_reference_cards",
    "plstitch_train.publish": "push_to_hub",
    "plstitch_eval.hub.clip_models": "clip_layout",
    "plstitch_eval.hub.dinov3": "dinov3_from_state_dict",
    "plstitch_eval.hub.models_general": "DINO_EVAL",
    "plstitch_eval.hub.models_plstitch": "PL_STITCH_EVAL",
    "plstitch_eval.hub.models_surgical": "SURGENET_MODELS",
    "plstitch_eval.hub.models_video": "VJEPA2_CLIP",
    "plstitch_eval.hub.pixels": "RawPixels",
    "plstitch_eval.hub.timesformer": "timesformer_from_state_dict",
    "plstitch_eval.hub.video_blocks": "FusedQKVAttention",
    "plstitch_eval.hub.videomae_vit": "videomae_from_state_dict",
    "plstitch_eval.hub.vjepa2": "vjepa2_from_state_dict",
    "plstitch_eval.hub.temporal_head": "load_temporal_head",
    "plstitch_eval.temporal_protocol": "run_temporal",
    "plstitch_eval.tool_presence": "run_tool_linear",
    "plstitch_eval.features": "FeatureStore",
    "plstitch_eval.store_repair": "redo_command",
    "plstitch_eval.store_locks": "store_lock",
    "plstitch_eval.knn": "knn_predict",
    "plstitch_eval.linear": "fit_linear_probe",
}
ALIAS_CHECK = """
import importlib, sys
import {old}
from {old} import {name}
new = sys.modules["{new}"]
assert sys.modules["{old}"] is new, sys.modules["{old}"]
assert importlib.import_module("{old}") is new and {name} is getattr(new, "{name}")
parent, _, child = "{old}".rpartition(".")
assert getattr(sys.modules[parent], child) is new  # `from parent import child` gives it too
"""
FINDER_ONCE = """
import importlib, sys
import plstitch_eval, plstitch_train
import plstitch_eval.utils.moved as moved
for module in (plstitch_eval, plstitch_train, moved, plstitch_eval, plstitch_train):
    importlib.reload(module)
finders = [f for f in sys.meta_path if type(f).__name__ == "MovedModuleFinder"]
assert len(finders) == 1, sys.meta_path
assert finders[0].moved == {**plstitch_train.MOVED_MODULES, **plstitch_eval.MOVED_MODULES}
import plstitch_train.rng, plstitch_eval.tool_presence
"""


def _run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_old_path_has_a_public_name_to_check() -> None:
    assert set(PUBLIC_NAME) == set(MOVED)
    assert all(old.startswith(("plstitch_train.", "plstitch_eval.")) for old in MOVED)


@pytest.mark.parametrize("package", ["plstitch_train", "plstitch_eval"])
def test_old_paths_import_their_new_modules_in_a_fresh_process(package: str) -> None:
    """One fresh process per package (a process each costs seconds): every old path, imported by its old
    name first where nothing imported its new home yet, is its new module."""
    olds = sorted(old for old in MOVED if old.startswith(f"{package}."))
    _run("".join(ALIAS_CHECK.format(old=old, new=MOVED[old], name=PUBLIC_NAME[old]) for old in olds))


@pytest.mark.filterwarnings("ignore:.*has moved to:DeprecationWarning")  # checked in a process of its own
@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imported_after_its_new_one_is_the_same_module(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new and sys.modules[old] is new


@pytest.mark.parametrize("name", ["plstitch_train.nope", "plstitch_eval.nope", "plstitch_train.run.nope"])
def test_an_unknown_module_is_still_not_found(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_the_finder_is_installed_once() -> None:
    assert sum(isinstance(f, MovedModuleFinder) for f in sys.meta_path) == 1
    _run(FINDER_ONCE)


def test_importing_plstitch_eval_stays_light() -> None:
    _run("import sys, plstitch_eval; assert 'torch' not in sys.modules, 'plstitch_eval imports torch'")


WARNS = """
import importlib, warnings
from plstitch_eval.utils.moved import REMOVED_IN
moved = {moved!r}
for old, new in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module(old)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, (old, [str(w.message) for w in caught])
    text = str(deprecations[0].message)
    assert new in text and old in text and REMOVED_IN in text, text
"""


def test_an_old_path_warns_naming_its_new_home_and_the_release_that_removes_it() -> None:
    _run(WARNS.format(moved=MOVED))


def test_docs_and_readme_name_only_the_new_paths() -> None:
    root = Path(__file__).resolve().parents[1]
    texts = {path: path.read_text(encoding="utf-8") for path in [root / "README.md", *root.glob("docs/*.md")]}
    named = [
        f"{path.name}: {old}"
        for path, text in texts.items()
        for old in MOVED
        if re.search(rf"{re.escape(old)}(?![\w.])", text)
    ]
    assert named == []
