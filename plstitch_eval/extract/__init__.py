"""Frozen feature extraction: dataset adapter -> decoding workers -> encoder -> feature store.

DataLoader workers each decode whole videos sequentially and prepare uint8 model crops (resize with the
model's interpolation, or on decode with `resize_on_decode`; centre crop) while the main process runs batched
forwards; normalisation happens on the device (both steps from `plstitch_eval.preprocess`). Each video is
written atomically as soon as its last frame is encoded, so a killed run leaves a consistent store that a
rerun resumes. A clip encoder (`Encoder.clip`) gets, for each sampled frame, the window of frames around it,
built from the same single decoding pass (`plstitch_eval.data.video.read_clips`); the store still holds one
feature per sampled frame and its manifest records the window.
With `crop_black_margin` (`--crop-black-margin`), each video's black border is found first, on its first 64 s
(`plstitch_eval.data.margin`), and cut before the model's resize; the manifest records each box under
`black_margins`.
Videos are decoded by PyAV, or by TorchCodec (`--decoder`, `plstitch_eval.data.decoders`: the same frames);
TorchCodec on CUDA (NVDEC) decodes in the main process and the frames are resized and cropped on the GPU,
never copied to the host. The manifest's preprocessing records a decoder other than PyAV.
Under `torchrun` (RANK/WORLD_SIZE set) rank r takes videos[r::world_size] and rank 0 writes the manifest.

A video already in the store is skipped only when its file checks out (`FeatureStore.check`: safetensors
header, shapes, the frame count the manifest recorded); a damaged one is extracted again. Several runs into
one store share the work: each claims a video before decoding it (`features.claim_video`), leaves videos
another run has claimed for the end and then waits for them, skipping each that the other run wrote.

Under torchrun run it as `torchrun ... -m plstitch_eval extract ...` (same options as `plstitch extract`).

The modules, in the order a run uses them:
- `options`: `ExtractOptions` and `select_videos` (which videos a run takes);
- `store`: the manifest, opening or resuming the store, which videos are still to do;
- `sharding`: each torchrun rank's share, rank 0's setup error, every rank's results;
- `chunks`: one video decoded into `FrameChunk`s (frames, device frames or clip windows);
- `shared`: one video decoded once into each model's chunks, for a run over several models;
- `loader`: the decoder choice, the worker count and the DataLoader over whole videos (with store claims);
- `encode`: batched forwards and the per-video writes;
- `summary`: `VideoResult`, `ExtractSummary` and the end-of-run table;
- `pipeline`: `extract_features`, the run end to end; `extract_many`, several encoders in one pass.
- `request`: what a `plstitch extract` command line asks for, checked before a model loads, and its run.
- `slurm_shards`, `slurm_run`: `--executor slurm --shards N`, the videos as N Slurm jobs into the same
  store(s), their record, `--status` and the summary once all have ended (docs/cluster.md; imported by the
  command only, from their own modules).
Every name other modules use is importable from `plstitch_eval.extract` itself.
"""

from __future__ import annotations

from plstitch_eval.extract.chunks import (
    FrameChunk,
    VideoJob,
    iter_clip_chunks,
    iter_device_chunks,
    iter_video_chunks,
)
from plstitch_eval.extract.loader import (
    CLAIM_POLL_SECONDS,
    CPU_WORKER_NICENESS,
    VideoFrameStream,
    available_cores,
    decode_threads,
    default_workers,
    make_loader,
    run_decoding,
)
from plstitch_eval.extract.options import (
    ExtractOptions,
    ExtractTarget,
    select_videos,
    store_name,
    store_targets,
)
from plstitch_eval.extract.pipeline import extract_features, extract_many, open_frame_cache
from plstitch_eval.extract.request import ExtractRequest, extract_session, video_names
from plstitch_eval.extract.shared import decode_key, iter_shared_chunks
from plstitch_eval.extract.store import (
    EXTRA_COMPAT_FIELDS,
    build_manifest,
    check_out_folder,
    check_stores_folder,
    dataset_splits,
    open_store,
    preprocessing_record,
)
from plstitch_eval.extract.summary import (
    ELSEWHERE,
    SUMMARY_ROWS,
    ExtractSummary,
    MultiExtractSummary,
    VideoResult,
    print_summary,
    summary_table,
)

__all__ = [
    "CLAIM_POLL_SECONDS",
    "CPU_WORKER_NICENESS",
    "ELSEWHERE",
    "EXTRA_COMPAT_FIELDS",
    "SUMMARY_ROWS",
    "ExtractOptions",
    "ExtractRequest",
    "ExtractSummary",
    "ExtractTarget",
    "FrameChunk",
    "MultiExtractSummary",
    "VideoFrameStream",
    "VideoJob",
    "VideoResult",
    "available_cores",
    "build_manifest",
    "check_out_folder",
    "check_stores_folder",
    "dataset_splits",
    "decode_key",
    "decode_threads",
    "default_workers",
    "extract_features",
    "extract_many",
    "extract_session",
    "iter_clip_chunks",
    "iter_device_chunks",
    "iter_shared_chunks",
    "iter_video_chunks",
    "make_loader",
    "open_frame_cache",
    "open_store",
    "preprocessing_record",
    "print_summary",
    "run_decoding",
    "select_videos",
    "store_name",
    "store_targets",
    "summary_table",
    "video_names",
]
