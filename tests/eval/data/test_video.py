import numpy as np
import pytest

from plstitch_eval.data.video import list_frame_files, probe, read_frames
from plstitch_eval.errors import ConfigError, DecodeError
from tests.eval.data.media import decode_index, write_index_frames, write_index_video


def _expected_samples(times: list[float], fps: float) -> list[int]:
    """Brute force of the documented rule: first frame at or after each k/fps, each frame at most once."""
    chosen: list[int] = []
    k = 0
    while k / fps <= times[-1] + 1e-9:
        first = next((i for i, t in enumerate(times) if t >= k / fps - 1e-9), None)
        if first is not None and first not in chosen:
            chosen.append(first)
        k += 1
    return chosen


def test_mp4_at_one_fps_picks_every_25th_frame(tmp_path):
    path = write_index_video(tmp_path / "clip.mp4", n_frames=80, fps=25)
    frames = list(read_frames(path, fps=1))
    assert [decode_index(f.image) for f in frames] == [0, 25, 50, 75]
    assert [f.index for f in frames] == [0, 1, 2, 3]
    np.testing.assert_allclose([f.time for f in frames], [0.0, 1.0, 2.0, 3.0], atol=1e-6)
    assert frames[0].image.dtype == np.uint8 and frames[0].image.shape == (32, 32, 3)


def test_mp4_every_frame_and_resize(tmp_path):
    path = write_index_video(tmp_path / "clip.mp4", n_frames=30, fps=25, size=(48, 32))
    frames = list(read_frames(path))
    assert [decode_index(f.image) for f in frames] == list(range(30))
    np.testing.assert_allclose([f.time for f in frames], np.arange(30) / 25, atol=1e-6)
    small = list(read_frames(path, fps=5, size=16))
    assert small[0].image.shape == (16, 24, 3)
    assert [decode_index(f.image) for f in small] == [0, 5, 10, 15, 20, 25]


def test_variable_frame_rate_sampled_by_timestamps(tmp_path):
    pts_ms = [0, 40, 80, 500, 1000, 1040, 2600, 3000, 3100, 4900]
    path = write_index_video(tmp_path / "vfr.mp4", n_frames=len(pts_ms), pts_ms=pts_ms)
    every = list(read_frames(path))
    np.testing.assert_allclose([f.time for f in every], np.array(pts_ms) / 1000, atol=1e-6)
    for fps in (1.0, 2.0, 0.5):
        got = [decode_index(f.image) for f in read_frames(path, fps=fps)]
        assert got == _expected_samples([t / 1000 for t in pts_ms], fps), fps
    # a constant-rate assumption would have picked frame 25 * k; the timestamps give 0, 4, 6, 7, 9
    assert [decode_index(f.image) for f in read_frames(path, fps=1)] == [0, 4, 6, 7, 9]


def test_probe_video_and_folder(tmp_path):
    path = write_index_video(tmp_path / "clip.mp4", n_frames=50, fps=25, size=(48, 32))
    info = probe(path)
    assert (info.fps, info.n_frames, info.width, info.height) == (25.0, 50, 48, 32)
    assert info.duration == pytest.approx(2.0, abs=0.05)
    folder = write_index_frames(tmp_path / "frames", 6, pattern="{}.png")
    assert probe(folder, folder_fps=2).n_frames == 6 and probe(folder, folder_fps=2).duration == 3.0


def test_frame_folder_natural_order_and_sampling(tmp_path):
    folder = write_index_frames(tmp_path / "frames", 12, pattern="frame_{}.png", start=1)
    assert [p.name for p in list_frame_files(folder)][:3] == ["frame_1.png", "frame_2.png", "frame_3.png"]
    frames = list(read_frames(folder))
    assert [decode_index(f.image) for f in frames] == list(range(12))
    sampled = list(read_frames(folder, fps=1, folder_fps=4))
    assert [decode_index(f.image) for f in sampled] == [0, 4, 8]
    assert [f.time for f in sampled] == [0.0, 1.0, 2.0]
    assert list(read_frames(folder, size=8))[0].image.shape == (8, 8, 3)
    assert len(list(read_frames(folder, fps=1))) == 12  # a folder is 1 fps unless told otherwise
    with pytest.raises(ConfigError, match="folder_fps"):
        list(read_frames(folder, fps=1, folder_fps=-2))


def test_missing_corrupt_and_truncated_videos_name_the_file(tmp_path):
    with pytest.raises(DecodeError, match="nothere.mp4"):
        list(read_frames(tmp_path / "nothere.mp4"))
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 50)
    with pytest.raises(DecodeError, match="junk.mp4"):
        list(read_frames(junk))
    with pytest.raises(DecodeError, match="junk.mp4"):
        probe(junk)
    whole = write_index_video(tmp_path / "whole.mp4", n_frames=60).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: len(whole) // 2])  # moov at the end: the container cannot be opened
    with pytest.raises(DecodeError, match="cut.mp4"):
        list(read_frames(cut))
    whole = write_index_video(tmp_path / "fast.mp4", n_frames=200, faststart=True).read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])  # index first: opens, then runs out of frames
    with pytest.raises(DecodeError, match=r"cut\.mp4: decoded \d+ of 200 frames"):
        list(read_frames(cut))
    bad_image = tmp_path / "frames"
    bad_image.mkdir()
    (bad_image / "0001.jpg").write_bytes(b"broken")
    with pytest.raises(DecodeError, match="0001.jpg"):
        list(read_frames(bad_image))


def _full_decode_samples(path, fps: float) -> list[tuple[float, np.ndarray]]:
    """Independent reference: decode every frame with PyAV (no skipping), keep the documented rule's picks."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1
        decoded = [(float((f.pts - stream.start_time) * stream.time_base), f.to_ndarray(format="rgb24"))
                   for f in container.decode(stream)]  # fmt: skip
    decoded.sort(key=lambda item: item[0])
    return [decoded[i] for i in _expected_samples([t for t, _ in decoded], fps)]


@pytest.mark.parametrize("threads", [1, 0])
@pytest.mark.parametrize(
    "pts_ms", [None, [0, 40, 80, 120, 500, 540, 1000, 1040, 1080, 2600, 2640, 3000, 3100, 4900]]
)
def test_unsampled_non_reference_frames_are_skipped_without_changing_the_samples(tmp_path, threads, pts_ms):
    """B-frame video: the sampled frames (times and pixels) equal a full decode's, and fewer frames are
    decoded than the file holds (x264's non-reference B-frames nobody samples are skipped)."""
    from plstitch_eval.data.video import _decode_video

    n = 90 if pts_ms is None else len(pts_ms)
    path = write_index_video(tmp_path / "b.mp4", n_frames=n, size=(64, 48), pts_ms=pts_ms, bframes=3)
    for fps in (1.0, 2.0):
        expected = _full_decode_samples(path, fps)
        got = list(read_frames(path, fps=fps, threads=threads))
        assert [f.time for f in got] == pytest.approx([t for t, _ in expected], abs=1e-9)
        for frame, (_, image) in zip(got, expected, strict=True):
            np.testing.assert_array_equal(frame.image, image)
    if threads == 1:  # frame threads may decode ahead regardless; one thread skips deterministically
        assert len(list(_decode_video(path, threads, fps=1.0))) < len(list(_decode_video(path, threads))) == n


def test_frames_timed_unlike_their_packets_turn_skipping_off(tmp_path, monkeypatch):
    """If decoded frames carry timestamps no packet had (the packet pass cannot be trusted), every later
    frame is decoded, so the samples still equal a full decode."""
    import plstitch_eval.data.video as video

    path = write_index_video(tmp_path / "b.mp4", n_frames=90, size=(64, 48), bframes=3)
    real = video._sampled_pts

    def mistimed(*args):
        plan = real(*args)
        return video._PacketPlan(
            frozenset(p + 1 for p in plan.all_pts), frozenset(p + 1 for p in plan.sampled)
        )

    monkeypatch.setattr(video, "_sampled_pts", mistimed)
    expected = _full_decode_samples(path, 1.0)
    got = list(read_frames(path, fps=1.0, threads=1))
    assert [f.time for f in got] == pytest.approx([t for t, _ in expected], abs=1e-9)
    for frame, (_, image) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(frame.image, image)
