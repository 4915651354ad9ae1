"""`plstitch_eval.extract.loader`: the DataLoader never starts more workers than videos, decodes in the main
process when asked to, and the PyAV decoder is the default choice."""

from __future__ import annotations

import os

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


def test_a_worker_stops_holding_claims_once_its_main_process_is_gone(tmp_path, monkeypatch):
    """After kill -9 of the main process, a decoding worker waiting for its last videos to be written gives
    its claims back instead of waiting forever (a resumed run would wait for them)."""
    from plstitch_eval.extract import loader

    stream = VideoFrameStream([VideoJob(0, tmp_path / "v0.mp4", video="v0")], PLAN, 4, tmp_path)
    claims = loader._Claims(stream)
    released: list[int] = []

    class Held:
        def release(self) -> None:
            released.append(0)

    claims.held[(0, 0)] = Held()
    claims.parent = os.getppid() + 1  # as a worker sees it once its parent died: another parent pid
    claims.wait_until_written()  # returns at once instead of waiting for a write that never comes
    claims.release_all()
    assert released == [0] and not claims.held
