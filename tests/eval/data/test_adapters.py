"""Each adapter on a tiny dataset written in its distributed layout."""

import numpy as np
import pytest

from plstitch_eval.data.datasets import decode, describe_datasets, get_dataset, labels_at, list_datasets
from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES
from plstitch_eval.errors import ConfigError, DataError
from tests.eval.data.media import decode_index, write_index_frames, write_index_video


def _phase_file(path, phases, start=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("Frame\tPhase\n" + "".join(f"{start + i}\t{p}\n" for i, p in enumerate(phases)))


@pytest.fixture
def cholec_root(tmp_path):
    root = tmp_path / "cholec80"
    for num in (1, 35, 45):
        write_index_video(root / "videos" / f"video{num:02d}.mp4", n_frames=60)
        phases = [CHOLEC80_PHASES[0]] * 30 + [CHOLEC80_PHASES[num % 7]] * 30
        _phase_file(root / "phase_annotations" / f"video{num:02d}-phase.txt", phases)
    return root


def test_registry_lists_all_adapters():
    assert set(list_datasets()) >= {
        "cholec80",
        "m2cai16",
        "autolaparo",
        "gtea",
        "breakfast",
        "synthetic",
        "folder",
    }
    rows = {row["name"]: row for row in describe_datasets()}
    assert rows["cholec80"]["classes"] == CHOLEC80_PHASES and rows["gtea"]["eval_fps"] == 15
    assert rows["cholec80"]["split_schemes"][0] == "40-40" and rows["gtea"]["background_classes"] == [
        "background"
    ]
    with pytest.raises(ConfigError, match="nknown dataset 'nope'"):
        get_dataset("nope", "/tmp")
    with pytest.raises(ConfigError, match="--root"):
        get_dataset("cholec80")


def test_cholec80_labels_splits_and_decoding(cholec_root):
    ds = get_dataset("cholec80", cholec_root)
    assert ds.class_names == CHOLEC80_PHASES and ds.native_fps == 25 and ds.eval_fps == 1
    assert get_dataset("cholec80", cholec_root, fps=5).eval_fps == 5
    videos = ds.videos()
    assert [v.name for v in videos] == ["video01", "video35", "video45"]
    assert videos[1].labels.dtype == np.int64 and videos[1].label_fps == 25
    assert videos[1].labels.tolist() == [0] * 30 + [35 % 7] * 30
    assert ds.splits() == {"train": ["video01", "video35"], "val": [], "test": ["video45"]}
    assert ds.splits("32/8/40") == {"train": ["video01"], "val": ["video35"], "test": ["video45"]}
    assert ds.splits("40-8-32") == {"train": ["video01", "video35"], "val": ["video45"], "test": []}
    assert [v.name for v in ds.videos("test")] == ["video45"]
    with pytest.raises(ConfigError, match="split scheme"):
        ds.splits("50-50")
    frames = list(decode(videos[1], fps=ds.eval_fps))
    assert [decode_index(f.image) for f in frames] == [0, 25, 50]
    labels, dropped = labels_at(videos[1], [f.time for f in frames])
    assert labels.tolist() == [0, 0, 35 % 7] and dropped == 0


def test_cholec80_errors_name_file_and_line(cholec_root):
    ann = cholec_root / "phase_annotations" / "video01-phase.txt"
    lines = ann.read_text().splitlines()
    ann.write_text("\n".join(lines[:3] + ["2\tCalotTriangle"] + lines[4:]) + "\n")
    with pytest.raises(DataError, match=r"video01-phase\.txt:4: unknown class 'CalotTriangle'"):
        get_dataset("cholec80", cholec_root).videos()
    ann.write_text("\n".join(lines[:3] + lines[4:]) + "\n")  # frame 2 missing
    with pytest.raises(DataError, match=r"video01-phase\.txt:4: frame 3 where 2 was expected"):
        get_dataset("cholec80", cholec_root).videos()
    ann.write_text("Frame,Phase\n0,Preparation\n")
    with pytest.raises(DataError, match=r"video01-phase\.txt:1: expected the header"):
        get_dataset("cholec80", cholec_root).videos()
    _phase_file(ann, ["Preparation"])
    (cholec_root / "videos" / "video35.mp4").unlink()
    with pytest.raises(DataError, match=r"video35\.mp4.*missing"):
        get_dataset("cholec80", cholec_root).videos()
    with pytest.raises(DataError, match="does not exist"):
        get_dataset("cholec80", cholec_root / "nowhere")
    with pytest.raises(ConfigError, match="accepts: fps, video_dir"):
        get_dataset("cholec80", cholec_root, label_base=0)


def test_labels_at_truncates_to_annotations(cholec_root):
    record = get_dataset("cholec80", cholec_root).videos()[0]
    times = np.arange(0, 4.0, 0.5)  # 60 labels at 25 fps cover 2.4 s
    labels, dropped = labels_at(record, times)
    expected = [
        record.labels[int(np.floor(t * 25 + 1e-6))] for t in times if int(np.floor(t * 25 + 1e-6)) < 60
    ]
    assert labels.tolist() == expected and dropped == len(times) - len(expected) == 3


def test_kfold_partitions_videos(cholec_root):
    ds = get_dataset("cholec80", cholec_root)
    folds = ds.kfold(3, seed=1)
    assert sorted(n for f in folds for n in f["test"]) == ds.video_names()
    for fold in folds:
        assert set(fold["train"]).isdisjoint(fold["test"])
        assert sorted(fold["train"] + fold["test"]) == ds.video_names()
    assert folds == ds.kfold(3, seed=1)
    with pytest.raises(ConfigError):
        ds.kfold(4)


def test_m2cai16_layout(tmp_path):
    root = tmp_path / "m2cai16"
    write_index_video(root / "train_dataset" / "workflow_video_01.mp4", n_frames=10)
    _phase_file(
        root / "train_dataset" / "workflow_video_01.txt", ["TrocarPlacement"] * 5 + ["Preparation"] * 5
    )
    write_index_video(root / "test_dataset" / "test_workflow_video_01.mp4", n_frames=10)
    _phase_file(root / "test_dataset" / "test_workflow_video_01.txt", ["GallbladderRetraction"] * 10)
    ds = get_dataset("m2cai16", root)
    assert len(ds.class_names) == 8 and ds.eval_fps == 1
    assert ds.splits() == {"train": ["workflow_video_01"], "val": [], "test": ["test_workflow_video_01"]}
    assert ds.videos("train")[0].labels.tolist() == [0] * 5 + [1] * 5
    assert ds.videos("test")[0].labels.tolist() == [7] * 10
    flat = tmp_path / "flat"
    (root / "train_dataset").rename(flat)
    for item in (root / "test_dataset").iterdir():
        item.rename(flat / item.name)
    assert get_dataset("m2cai16", flat).splits()["test"] == ["test_workflow_video_01"]
    (flat / "test_workflow_video_01.txt").write_text("Frame\tPhase\n0\tPacking\n")
    with pytest.raises(DataError, match=r"test_workflow_video_01\.txt:2: unknown class 'Packing'"):
        get_dataset("m2cai16", flat).videos()


def test_m2cai16_any_header_and_each_videos_own_frame_rate(tmp_path):
    root = tmp_path / "m2cai16" / "train_dataset"
    write_index_video(
        root / "workflow_video_02.mp4", n_frames=48, fps=24
    )  # an EndoVis-2015 style 24 fps video
    rows = "".join(f"{i}\t{'Preparation' if i < 24 else 'ClippingCutting'}\n" for i in range(48))
    (root / "workflow_video_02.txt").write_text("frame_number\tphase_label\n" + rows)
    record = get_dataset("m2cai16", root.parent).videos()[0]
    assert record.label_fps == pytest.approx(24.0)  # from the container, not a fixed 25
    # 0.98 s is row 23 at 24 fps (still Preparation); a fixed 25 fps would read row 24 (ClippingCutting)
    assert labels_at(record, [0.0, 0.98, 1.0])[0].tolist() == [1, 1, 3]
    (root / "workflow_video_02.txt").write_text("")
    with pytest.raises(DataError, match=r"workflow_video_02\.txt:1: expected a header line"):
        get_dataset("m2cai16", root.parent).videos()


def _autolaparo(root, ids_by_video, header="Frame\tPhase"):
    for name, ids in ids_by_video.items():
        write_index_frames(root / "frames" / name, len(ids))
        rows = "".join(f"{i + 1}\t{p}\n" for i, p in enumerate(ids))
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"label_{name}.txt").write_text(f"{header}\n{rows}")


def test_autolaparo_frames_label_base_and_split(tmp_path):
    root = tmp_path / "autolaparo"
    _autolaparo(root, {"01": [1, 1, 2, 2, 3], "12": [3, 4, 5], "15": [6, 7, 7, 7]})
    ds = get_dataset("autolaparo", root)
    assert ds.eval_fps == 1 and len(ds.class_names) == 7
    videos = {v.name: v for v in ds.videos()}
    assert videos["01"].labels.tolist() == [0, 0, 1, 1, 2]  # ids 1-7 (the release's, the default)
    assert ds.splits() == {"train": ["01"], "val": ["12"], "test": ["15"]}
    frames = list(decode(videos["01"], fps=ds.eval_fps))
    assert [decode_index(f.image) for f in frames] == [0, 1, 2, 3, 4]
    assert labels_at(videos["01"], [f.time for f in frames])[0].tolist() == [0, 0, 1, 1, 2]
    with pytest.raises(DataError, match=r"label_15\.txt:3: phase id 7 is outside 0\.\.6"):
        get_dataset("autolaparo", root, label_base=0).videos()


def test_autolaparo_zero_based_detection_and_errors(tmp_path):
    root = tmp_path / "a0"
    _autolaparo(root, {"02": [0, 0, 1], "03": [5, 6]})
    with pytest.raises(
        DataError, match=r"label_02\.txt:2: phase id 0 is outside 1\.\.7; check the file or label_base"
    ):
        get_dataset("autolaparo", root).videos()  # the release is 1-based: a 0 is an error by default
    assert get_dataset("autolaparo", root, label_base="auto").videos()[0].labels.tolist() == [0, 0, 1]
    assert get_dataset("autolaparo", root, label_base=0).videos()[0].labels.tolist() == [0, 0, 1]
    root = tmp_path / "bad"
    _autolaparo(root, {"02": [1, 1, 9]})
    with pytest.raises(DataError, match=r"label_02\.txt:4: phase id 9"):
        get_dataset("autolaparo", root).videos()
    (root / "labels" / "label_02.txt").write_text("Frame\tPhase\n1\t1\n")
    for frame in (root / "frames" / "02").iterdir():
        frame.unlink()
    (root / "frames" / "02").rmdir()
    with pytest.raises(DataError, match=r"frames/02.*missing"):
        get_dataset("autolaparo", root).videos()
    write_index_video(root / "videos" / "02.mp4", n_frames=50)
    record = get_dataset("autolaparo", root).videos()[0]
    assert record.source.name == "02.mp4" and record.folder_fps is None and record.label_fps == 1


def _mstcn(root, classes, videos, bundles):
    (root / "groundTruth").mkdir(parents=True)
    (root / "splits").mkdir()
    (root / "mapping.txt").write_text("".join(f"{i} {c}\n" for i, c in enumerate(classes)))
    for name, (actions, kind) in videos.items():
        (root / "groundTruth" / f"{name}.txt").write_text("".join(a + "\n" for a in actions))
        if kind == "video":
            write_index_video(root / "videos" / f"{name}.mp4", n_frames=len(actions), fps=15)
        else:
            write_index_frames(root / "frames" / name, len(actions), pattern="img_{:05d}.png")
    for n in range(1, 5):
        for split, names in bundles.items():
            (root / "splits" / f"{split}.split{n}.bundle").write_text("".join(f"{v}.txt\n" for v in names))


def test_gtea_mstcn_layout(tmp_path):
    root = tmp_path / "gtea"
    classes = ["take", "open", "pour", "background"]
    _mstcn(
        root,
        classes,
        {
            "S1_Tea_C1": (["background"] * 4 + ["take"] * 8 + ["pour"] * 3, "video"),
            "S2_Tea_C1": (["open"] * 6, "frames"),
        },
        {"train": ["S1_Tea_C1"], "test": ["S2_Tea_C1"]},
    )
    ds = get_dataset("gtea", root)
    assert ds.class_names == classes and ds.background_classes == ["background"]
    assert ds.native_fps == 15 and ds.eval_fps == 15 and get_dataset("gtea", root, fps=5).eval_fps == 5
    assert ds.splits("split3") == {"train": ["S1_Tea_C1"], "val": [], "test": ["S2_Tea_C1"]}
    s1, s2 = ds.videos()
    assert s1.labels.tolist() == [3] * 4 + [0] * 8 + [2] * 3 and s1.label_fps == 15
    frames = list(decode(s1, fps=ds.eval_fps))
    assert [decode_index(f.image) for f in frames] == list(range(15))
    assert labels_at(s1, [f.time for f in frames])[0].tolist() == s1.labels.tolist()
    assert s2.folder_fps == 15 and len(list(decode(s2, fps=5))) == 2
    (root / "splits" / "test.split2.bundle").write_text("S2_Tea_C1.txt\nS9_Gone_C1.txt\n")
    with pytest.raises(DataError, match=r"test\.split2\.bundle:2: video 'S9_Gone_C1'"):
        ds.splits("split2")
    (root / "groundTruth" / "S2_Tea_C1.txt").write_text("open\nstir\n")
    with pytest.raises(DataError, match=r"S2_Tea_C1\.txt:2: unknown class 'stir'"):
        get_dataset("gtea", root).videos()


def test_breakfast_mstcn_layout_and_mapping_errors(tmp_path):
    root = tmp_path / "breakfast"
    _mstcn(
        root,
        ["SIL", "take_bowl"],
        {"P03_cam01_P03_cereals": (["SIL"] * 3 + ["take_bowl"] * 3, "video")},
        {"train": ["P03_cam01_P03_cereals"], "test": []},
    )
    ds = get_dataset("breakfast", root)
    assert ds.background_classes == [] and ds.eval_fps == 15
    assert ds.videos()[0].labels.tolist() == [0, 0, 0, 1, 1, 1]
    (root / "mapping.txt").write_text("0 SIL\n2 take_bowl\n")
    with pytest.raises(DataError, match=r"mapping\.txt: class ids must be 0\.\.1"):
        get_dataset("breakfast", root)
    (root / "mapping.txt").write_text("0 SIL\nfoo\n")
    with pytest.raises(DataError, match=r"mapping\.txt:2"):
        get_dataset("breakfast", root)


def test_folder_adapter_csv(tmp_path):
    root = tmp_path / "mine"
    write_index_video(root / "videos" / "a.mp4", n_frames=50, fps=25)
    write_index_frames(root / "videos" / "b", 3)
    rows = ["video,frame,label,split"]
    rows += [f"a,{i},{'cut' if i < 1 else 'sew'},train" for i in range(2)]
    rows += [f"b,{i},{'sew' if i < 2 else 'close'},test" for i in range(3)]
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    ds = get_dataset("folder", root)
    assert ds.class_names == ["cut", "sew", "close"] and ds.eval_fps == 1
    assert ds.splits() == {"train": ["a"], "val": [], "test": ["b"]}
    a, b = ds.videos()
    assert a.labels.tolist() == [0, 1] and b.labels.tolist() == [1, 1, 2] and b.folder_fps == 1
    frames = list(decode(a, fps=1))
    assert [decode_index(f.image) for f in frames] == [0, 25]
    assert [decode_index(f.image) for f in decode(b, fps=1)] == [0, 1, 2]
    (root / "classes.txt").write_text("close\nsew\ncut\n")
    assert get_dataset("folder", root).videos()[0].labels.tolist() == [2, 1]
    rows[3] = "b,1,sew,test"
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"labels\.csv:4: b frame 1 where 0 was expected"):
        get_dataset("folder", root).videos()
