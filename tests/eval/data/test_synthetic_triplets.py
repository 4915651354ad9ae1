"""synthetic-triplets: `synthetic`'s cases with CholecT50 action triplets that follow from tools and phase."""

import numpy as np
import pytest

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES, CHOLEC80_TOOLS
from plstitch_eval.data.datasets.cholect50_vocab import INSTRUMENTS, TRIPLET_NAMES
from plstitch_eval.data.synthetic_triplets import synthetic_triplets, triplet_table

TINY = {"n_videos": 3, "size": 32, "min_seconds": 3.0, "max_seconds": 5.0, "workers": 1}

# written out here, independently of the module's table: (tool, phase) -> triplet; None = the tool's default
EXPECTED = {
    ("Hook", "CalotTriangleDissection"): "hook,dissect,cystic_duct",
    ("Hook", "GallbladderDissection"): "hook,dissect,gallbladder",
    ("Hook", "ClippingCutting"): "hook,coagulate,liver",
    ("Clipper", "ClippingCutting"): "clipper,clip,cystic_artery",
    ("Scissors", "ClippingCutting"): "scissors,cut,cystic_duct",
    ("Grasper", "GallbladderPackaging"): "grasper,pack,gallbladder",
    ("Grasper", "CalotTriangleDissection"): "grasper,retract,gallbladder",
    ("Irrigator", "CleaningCoagulation"): "irrigator,aspirate,fluid",
    ("Bipolar", "CleaningCoagulation"): "bipolar,coagulate,liver",
}


def test_each_instrument_does_one_triplet_of_its_own_in_every_phase():
    table = triplet_table()
    for t, tool in enumerate(CHOLEC80_TOOLS):
        for p, phase in enumerate(CHOLEC80_PHASES):
            if tool == "SpecimenBag":  # a target, not a CholecT50 instrument
                assert table[p, t] == -1
                continue
            name = TRIPLET_NAMES[table[p, t]]
            assert name.split(",")[0] == tool.lower() and tool.lower() in INSTRUMENTS
            if (tool, phase) in EXPECTED:
                assert name == EXPECTED[(tool, phase)]
    assert len({TRIPLET_NAMES[i] for i in table[table >= 0]}) >= 15  # the verbs and targets vary


def test_multi_hot_equals_a_row_by_row_reading():
    rng = np.random.default_rng(0)
    phases = rng.integers(0, 7, 200)
    tools = (rng.random((200, 7)) < 0.3).astype(np.int8)
    tools[5] = -1
    phases[9] = -1
    got = synthetic_triplets(phases, tools)
    assert got.shape == (200, 100) and got.dtype == np.int8
    for m in range(200):
        if m in (5, 9):
            assert (got[m] == -1).all()
            continue
        want = np.zeros(100, np.int8)
        for t, tool in enumerate(CHOLEC80_TOOLS):
            if tools[m, t] == 1 and tool != "SpecimenBag":
                name = EXPECTED.get((tool, CHOLEC80_PHASES[phases[m]]))
                idx = TRIPLET_NAMES.index(name) if name else triplet_table()[phases[m], t]
                want[idx] = 1
        np.testing.assert_array_equal(got[m], want)


@pytest.mark.slow
def test_the_dataset_is_synthetic_plus_triplets(tmp_path):
    plain = get_dataset("synthetic", root=tmp_path, **TINY)
    ivt = get_dataset("synthetic-triplets", root=tmp_path, **TINY)
    assert ivt.root == plain.root  # the same generated folder: no second copy of the videos
    assert ivt.triplet_names == list(TRIPLET_NAMES) and not plain.triplet_names
    for a, b in zip(plain.videos(), ivt.videos(), strict=True):
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.tools, b.tools)
        assert a.triplets is None and b.triplets.shape == (len(b.tools), 100)
        np.testing.assert_array_equal(b.triplet_times, b.tool_times)
        grasper_rows = b.tools[:, 0] == 1
        grasper_triplets = b.triplets[:, [i for i, n in enumerate(TRIPLET_NAMES) if n.startswith("grasper")]]
        np.testing.assert_array_equal(grasper_triplets.sum(1) == 1, grasper_rows)
