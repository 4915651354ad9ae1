"""Issue 44: a saved probe folder follows the user's umask - `probe.safetensors` included (safetensors'
`save_file` creates its files 0600), like `probe.json` and every other output."""

from __future__ import annotations

import os
import stat

import pytest

from plstitch_eval.probes import PROBE_JSON, PROBE_WEIGHTS, load_probe
from tests.eval.probes.conftest import save_random


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_every_file_of_a_probe_folder_follows_the_umask(tmp_path, umask, file_mode, dir_mode):
    old = os.umask(umask)
    try:
        folder = save_random(tmp_path / "probe")
        again = save_random(tmp_path / "probe", overwrite=True)  # replacing a probe: the same modes
    finally:
        os.umask(old)
    assert again == folder
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert modes == {PROBE_JSON: file_mode, PROBE_WEIGHTS: file_mode}
    assert stat.S_IMODE(folder.stat().st_mode) == dir_mode
    assert [p.name for p in tmp_path.iterdir()] == ["probe"]  # no temporary file or folder left behind
    assert load_probe(folder).kind == "linear"  # the sha256 recorded is the renamed file's
