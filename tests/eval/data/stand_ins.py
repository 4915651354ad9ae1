"""Tiny stand-ins of released datasets, written in their exact layout (names, folders, file formats), with
frames that encode their index (`tests.eval.data.media.index_image`) so a test can tell which one it read."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from tests.eval.data.media import index_image
from tests.media import write_video

# Endoscapes2023: split -> video id -> (first frame number at 25 fps, number of 1 fps frames, {second: ds})
ENDOSCAPES = {
    "train": {
        "1": (29375, 12, {0: [1.0, 2 / 3, 0.0], 5: [1 / 3, 0.0, 0.0], 10: [1.0, 1.0, 1 / 3]}),
        "2": (0, 6, {0: [0.0, 0.0, 0.0], 5: [2 / 3, 1 / 3, 1.0]}),
    },
    "val": {"121": (14850, 7, {0: [0.0, 1.0, 0.0], 5: [1.0, 1.0, 1.0]})},
    "test": {"162": (5850, 3, {0: [1 / 3, 1 / 3, 1 / 3]})},
}


def write_endoscapes(root: Path, videos: dict = ENDOSCAPES) -> Path:
    """`<split>/<video>_<frame>.jpg` (1 fps), the three COCO files of each split and `<split>_vids.txt`."""
    for split, split_videos in videos.items():
        folder = root / split
        folder.mkdir(parents=True, exist_ok=True)
        images_ds, images_vid = [], []
        for video, (first, n_frames, cvs) in split_videos.items():
            last_ds = None
            for second in range(n_frames):
                frame = first + 25 * second
                name = f"{video}_{frame}.jpg"
                Image.fromarray(index_image(second)).save(folder / name, quality=100)
                last_ds = cvs.get(second, last_ds)
                image = {"file_name": name, "id": len(images_vid) + 1, "height": 32, "width": 32,
                         "video_id": int(video), "is_det_keyframe": False,
                         "is_ds_keyframe": second in cvs, "ds": last_ds or [0.0, 0.0, 0.0]}  # fmt: skip
                images_vid.append(image)
                if second in cvs:
                    images_ds.append(image)
        categories = [{"id": 1, "name": "cystic_plate"}]
        for file, images in (
            ("annotation_ds_coco.json", images_ds),
            ("annotation_coco_vid.json", images_vid),
        ):
            coco = {"images": images, "annotations": [], "categories": categories}
            (folder / file).write_text(json.dumps(coco))
        (folder / "annotation_coco.json").write_text(json.dumps({"images": [], "annotations": [],
                                                                 "categories": categories}))  # fmt: skip
        (root / f"{split}_vids.txt").write_text("".join(f"{v}\n" for v in split_videos))
    return root


# JIGSAWS: task -> trial -> (self-proclaimed level, six item scores, number of frames at 30 fps)
JIGSAWS = {
    "Suturing": {
        "Suturing_B001": ("N", (3, 2, 1, 2, 2, 3), 5),
        "Suturing_B002": ("N", (4, 2, 2, 3, 3, 3), 4),
        "Suturing_C001": ("I", (4, 4, 4, 5, 4, 5), 6),
        "Suturing_D001": ("E", (2, 2, 2, 3, 2, 3), 3),
        "Suturing_D002": ("E", (2, 3, 3, 4, 3, 3), 4),
    },
    "Knot_Tying": {
        "Knot_Tying_B001": ("N", (2, 2, 2, 2, 2, 2), 3),
        "Knot_Tying_C002": ("I", (3, 3, 3, 3, 3, 3), 3),
    },
    "Needle_Passing": {"Needle_Passing_H004": ("N", (3, 3, 2, 3, 3, 3), 3)},
}


def write_jigsaws(root: Path, tasks: dict = JIGSAWS) -> Path:
    """`<Task>/video/<trial>_capture1.avi` and `_capture2.avi` (MPEG-4 in AVI, 30 fps) and
    `<Task>/meta_file_<Task>.txt` as the release writes it (name, empty, level, GRS, empty, six items)."""
    for task, trials in tasks.items():
        lines = []
        for trial, (level, items, n_frames) in trials.items():
            for capture in (1, 2):
                path = root / task / "video" / f"{trial}_capture{capture}.avi"
                write_video(path, lambda i: index_image(i), n_frames, fps=30, codec="mpeg4",
                            options={"qscale": "1"})  # fmt: skip
            lines.append("\t".join([trial, "", level, str(sum(items)), "", *map(str, items)]))
        (root / task / "transcriptions").mkdir(parents=True, exist_ok=True)
        (root / task / f"meta_file_{task}.txt").write_text("\n".join(lines) + "\n")
    return root


# CholecT45 release: video -> per 1 fps frame, its triplet ids (VID02 tests crossval-1, VID01 validates)
CHOLECT45 = {
    "VID01": [[17], [17, 60], [], [94], [77, 1]],
    "VID02": [[], [60], [60, 99], [17]],
    "VID05": [[1], [17, 77], [13], [], [60], [94, 99]],
    "VID10": [[60], [1, 13], [17], [77]],
}


def cholect45_rows(triplets: list[list[int]], n_labels: int, column: int | None = None) -> str:
    """A `triplet/` (column None) or `instrument/` (column 1 of TRIPLET_MAP) file: frame index, then 0/1."""
    from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_MAP

    lines = []
    for frame, ids in enumerate(triplets):
        on = set(ids) if column is None else {TRIPLET_MAP[t][column] for t in ids}
        lines.append(",".join([str(frame), *("1" if k in on else "0" for k in range(n_labels))]))
    return "\n".join(lines) + "\n"


def write_cholect45(root: Path, videos: dict = CHOLECT45) -> Path:
    """CholecT45 as CAMMA released it: `data/VIDxx/000000.png` (1 fps), `triplet/`, `instrument/`, `verb/`,
    `target/VIDxx.txt` (frame index, then 0/1 labels), `dict/*.txt` (`<id>:<name>`, from our vocabulary),
    `dict/maps.txt`, LICENSE and README.md."""
    from plstitch_eval.data.datasets.cholect50_vocab import (
        INSTRUMENTS,
        TARGETS,
        TRIPLET_MAP,
        TRIPLET_NAMES,
        VERBS,
    )
    from tests.eval.data.media import write_index_frames

    vocab = {"triplet": TRIPLET_NAMES, "instrument": INSTRUMENTS, "verb": VERBS, "target": TARGETS}
    for folder in (*vocab, "dict"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for kind, names in vocab.items():
        (root / "dict" / f"{kind}.txt").write_text("".join(f"{i}:{n}\n" for i, n in enumerate(names)))
    maps = "".join(",".join(map(str, row)) + "\n" for row in TRIPLET_MAP)
    (root / "dict" / "maps.txt").write_text("# IVT, I, V, T, IV, IT\n" + maps)
    for name, triplets in videos.items():
        write_index_frames(root / "data" / name, len(triplets), pattern="{:06d}.png", start=0)
        for kind, column in (("triplet", None), ("instrument", 1), ("verb", 2), ("target", 3)):
            text = cholect45_rows(triplets, len(vocab[kind]), column)
            (root / kind / f"{name}.txt").write_text(text)
    (root / "LICENSE").write_text("CC BY-NC-SA 4.0\n")
    (root / "README.md").write_text("# CholecT45 (stand-in)\n")
    return root
