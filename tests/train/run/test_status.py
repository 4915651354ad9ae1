"""`plstitch_train.run.status`: the settings and progress of a `plstitch train` checkpoint, whichever form
(nested sections or the old flat dict) its config was saved in."""

from __future__ import annotations

import pytest

from plstitch_train.presets import get_preset
from plstitch_train.publishing.export import RunProgress as ExportRunProgress
from plstitch_train.publishing.export import run_progress as export_run_progress
from plstitch_train.run.status import RunProgress, run_progress, trainer_config


@pytest.mark.parametrize("form", ["flat", "nested"])
def test_progress_of_a_checkpoint_in_either_config_form(form: str) -> None:
    config = get_preset("tiny-cpu").replace(epochs=2, accum_steps=2)
    saved = config.to_flat_dict() if form == "flat" else config.to_dict()
    # 5 steps of 2 micro-batches: epoch 1 had 3 steps, then 2 steps (4 micro-batches) into epoch 2
    checkpoint = {"config": saved, "model": {}, "step": 5, "sampler": {"epoch": 1, "batch": 4}}
    assert trainer_config(checkpoint) == config
    progress = run_progress(checkpoint, config)
    assert progress == RunProgress(step=5, total_steps=6, epoch=2, epochs=2) and not progress.finished
    assert progress.describe() == "unfinished run: stopped at step 5 of 6 (epoch 2 of 2)"
    capped = run_progress(checkpoint, config.replace(max_steps=5))
    assert capped.total_steps == 5 and capped.finished


def test_other_checkpoints_have_no_trainer_config() -> None:
    assert trainer_config({"state_dict": {}}) is None
    assert trainer_config({"config": {"lamda": 1}, "model": {}}) is None
    assert ExportRunProgress is RunProgress and export_run_progress is run_progress  # the old names
