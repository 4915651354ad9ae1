"""`plstitch_train.config` loads without torch (the CLI lists presets and objectives from it), and the loss
branches have one table that the config's checks and the run's listings share."""

from __future__ import annotations

import subprocess
import sys

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.config import BRANCH_NAMES, BRANCHES, LOSS_KEYS, LossConfig, branch, branch_weights


def test_importing_the_config_and_the_presets_loads_no_torch() -> None:
    code = (
        "import sys, plstitch_train.config, plstitch_train.presets, plstitch_train.config.branches\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('plstitch_train.losses')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_branch_table_names_each_branch_its_weight_and_display_name() -> None:
    assert BRANCH_NAMES == ("vid", "mim", "jigsaw") and LOSS_KEYS == ("loss", "vid", "mim", "jigsaw")
    assert [(b.weight_field, b.display) for b in BRANCHES] == [
        ("lambda_vid", "L_vid"),
        ("lambda_mim", "L_MIM"),
        ("lambda_jigsaw", "L_jigsaw"),
    ]
    assert all(hasattr(LossConfig(), b.weight_field) for b in BRANCHES)
    assert branch_weights(LossConfig(lambda_mim=0.0)) == {"vid": 1.0, "mim": 0.0, "jigsaw": 0.4}
    assert branch("mim").display == "L_MIM"
    with pytest.raises(ConfigError, match="Unknown branch 'audio'; use one of vid, mim, jigsaw."):
        branch("audio")
