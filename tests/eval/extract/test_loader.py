"""`plstitch_eval.extract.loader`: the DataLoader never starts more workers than videos, decodes in the main
process when asked to, and the PyAV decoder is the default choice."""

from __future__ import annotations

import torch

from plstitch_eval.data.decoders import PYAV
from plstitch_eval.extract.chunks import VideoJob
from plstitch_eval.extract.loader import VideoFrameStream, make_loader, run_decoding
from plstitch_eval.hub import DataConfig
from plstitch_eval.preprocess import frame_plan
from tests.eval.data.media import write_index_video

PLAN = frame_plan(DataConfig.for_size(32), 5.0)


def test_workers_are_capped_by_the_videos(tmp_path):
    jobs = [VideoJob(i, tmp_path / f"v{i}.mp4") for i in range(2)]
    loader = make_loader(jobs, PLAN, 4, 8, torch.device("cpu"))
    assert loader.num_workers == 2 and isinstance(loader.dataset, VideoFrameStream)
    assert make_loader(jobs, PLAN, 4, 0, torch.device("cpu")).num_workers == 0


def test_the_main_process_alone_decodes_in_the_given_order(tmp_path):
    jobs = [VideoJob(i, write_index_video(tmp_path / f"v{i}.mp4", n)) for i, n in enumerate([10, 40])]
    loader = make_loader(jobs, PLAN, 4, 0, torch.device("cpu"))
    order = [chunk.video_index for chunk in loader if chunk.last]
    assert order == [0, 1]


def test_pyav_is_the_default_decoder_and_is_said_only_when_asked(tmp_path, capsys):
    source = write_index_video(tmp_path / "v.mp4", 5)
    decoding = run_decoding(
        "pyav", "auto", torch.device("cpu"), PLAN, [tmp_path / "missing.mp4", source], False
    )
    assert decoding == PYAV
    assert capsys.readouterr().err == ""
