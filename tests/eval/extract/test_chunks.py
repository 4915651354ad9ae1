"""`plstitch_eval.extract.chunks`: one video decoded into batches of uint8 crops, in frame order, the last one
marked; a decoding failure is an error chunk naming the file, never an exception."""

from __future__ import annotations

import pytest
import torch

from plstitch_eval.errors import ConfigError
from plstitch_eval.extract.chunks import VideoJob, iter_clip_chunks, iter_video_chunks, note_chunk
from plstitch_eval.hub import DataConfig
from plstitch_eval.preprocess import frame_plan
from tests.eval.data.media import decode_index, write_index_video


def test_a_video_becomes_full_batches_then_a_last_short_one(tmp_path):
    source = write_index_video(tmp_path / "v.mp4", 30)  # 1.2 s at 25 fps: 6 frames at 5 fps
    chunks = list(iter_video_chunks(VideoJob(7, source), frame_plan(DataConfig.for_size(32), 5.0), 4))
    assert [len(c.images) for c in chunks] == [4, 2]
    assert [c.last for c in chunks] == [False, True]
    assert all(c.video_index == 7 and c.error is None and c.images.dtype == torch.uint8 for c in chunks)
    assert tuple(chunks[0].images.shape[1:]) == (3, 32, 32)
    times = torch.cat([c.frame_times for c in chunks]).tolist()
    assert [round(t * 25) for t in times] == [0, 5, 10, 15, 20, 25]
    images = torch.cat([c.images for c in chunks])
    assert [decode_index(image.permute(1, 2, 0).numpy()) for image in images] == [0, 5, 10, 15, 20, 25]


@pytest.mark.parametrize("content", [None, b"not a video"], ids=["missing", "corrupt"])
def test_a_video_that_cannot_be_decoded_ends_with_one_error_chunk_naming_it(tmp_path, content):
    source = tmp_path / "bad.mp4"
    if content is not None:
        source.write_bytes(content)
    (chunk,) = iter_video_chunks(VideoJob(0, source), frame_plan(DataConfig.for_size(32), 5.0), 4)
    assert chunk.last and len(chunk.images) == 0 and str(source) in chunk.error


def test_clip_chunks_need_a_plan_with_a_window(tmp_path):
    with pytest.raises(ConfigError, match="clip window"):
        next(iter_clip_chunks(VideoJob(0, tmp_path / "v.mp4"), frame_plan(DataConfig.for_size(32), 5.0), 4))


def test_note_chunks_carry_no_frames_and_end_the_video_only_when_written_elsewhere(tmp_path):
    job = VideoJob(3, tmp_path / "v.mp4")
    waiting, elsewhere = note_chunk(job, waiting=True), note_chunk(job, elsewhere=True)
    assert waiting.waiting and not waiting.last and not waiting.elsewhere
    assert elsewhere.elsewhere and elsewhere.last and not elsewhere.waiting
    assert len(waiting.images) == len(elsewhere.frame_times) == 0 and waiting.video_index == 3
