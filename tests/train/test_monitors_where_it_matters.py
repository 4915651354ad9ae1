"""The training monitors tested where a wrong input would show (issue 54, item 3): the collapse measures with
non-zero CLS and patch centres that differ (at initialisation both are zero, so using the wrong one went
unseen), and the k-NN monitor on a run whose student and teacher differ (the teacher is the one evaluated)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.data.datasets import registered_dataset
from plstitch_eval.extract import extract_features
from plstitch_eval.extract.options import ExtractOptions
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME
from plstitch_eval.protocols.knn import run_knn
from plstitch_train.model import PLStitchModel
from plstitch_train.monitors.collapse import CollapseMonitor
from plstitch_train.monitors.collapse_probe import probe_checkpoint
from plstitch_train.monitors.knn import KnnMonitor
from plstitch_train.run.checkpoint import CHECKPOINT_FORMAT
from plstitch_train.trainer import load_training_checkpoint, train
from tests.train.conftest import tiny_config
from tests.train.test_knn_monitor import TOY, _TinySynthetic


def entropy_by_hand(logits: torch.Tensor, centre: torch.Tensor, temperature: float) -> float:
    """Mean over images of -sum_k p_k log p_k, p = softmax((logits - centre) / T), written out here."""
    z = (logits.double() - centre.double()) / temperature
    z = z - z.max(dim=-1, keepdim=True).values
    p = z.exp() / z.exp().sum(-1, keepdim=True)
    return float(-(p * p.log()).sum(-1).mean())


def test_collapse_measures_use_the_cls_centre_not_the_patch_centre(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    """A teacher whose CLS centre and patch centre are non-zero and differ (as after centring updates): the
    monitor's measures equal the entropy written out here with the CLS centre and `probe_checkpoint`'s on a
    checkpoint of the same teacher, and the patch centre would give another entropy."""
    config = tiny_config(video_dir, frame_cache, collapse_every=1)
    torch.manual_seed(0)
    model = PLStitchModel(config).train()
    loss = model.ibot_loss
    k = config.ibot_out_dim
    generator = torch.Generator().manual_seed(1)
    loss.center.copy_(torch.randn(1, k, generator=generator) * 0.1)  # as after many centring updates
    loss.center2.copy_(torch.randn(1, 1, k, generator=generator) * 0.1)  # another centre, the patches'
    crops = torch.randn(3, 2, 3, 32, 32, generator=generator)  # [B, views, 3, H, W]
    images = crops.transpose(0, 1).flatten(0, 1)  # the probe batch: view-major, as the teacher sees it
    last_epoch = 10**9  # clamped to the last epoch's temperature, the one probe_checkpoint takes
    monitor = CollapseMonitor(model, config)
    monitor.keep_probe({"crops": crops})
    got = monitor.measure(1, mim_loss=1.0, epoch=last_epoch)

    with torch.no_grad():
        model.teacher.eval()
        head = model.teacher["ibot_head"]
        logits = head.last_layer(F.normalize(head.mlp(model.teacher["backbone"](images)[:, 0]), dim=-1))
    temperature = loss.temperatures(last_epoch)[0]
    with_cls = entropy_by_hand(logits, loss.center, temperature)
    with_patch = entropy_by_hand(logits, loss.center2.flatten(1), temperature)
    assert abs(with_cls - with_patch) > 1e-2  # the two centres give different measures here
    assert got["collapse_teacher_entropy"] == pytest.approx(with_cls, rel=1e-5)
    assert got["collapse_entropy_ratio"] == pytest.approx(with_cls / math.log(k), rel=1e-5)

    checkpoint = {"format": CHECKPOINT_FORMAT, "config": config.to_flat_dict(), "model": model.state_dict()}
    torch.save(checkpoint, tmp_path / CHECKPOINT_NAME)  # what probe_checkpoint reads of a run's checkpoint
    probed = probe_checkpoint(tmp_path, images)  # collapse_probe's own forward and choice of centre
    assert probed["teacher_entropy"] == pytest.approx(with_cls, rel=1e-5)
    assert {name: got[f"collapse_{name}"] for name in probed} == pytest.approx(probed, rel=1e-5, abs=1e-6)


@pytest.fixture(scope="module")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("knn_toy_differ")
    with registered_dataset(TOY, _TinySynthetic):
        _TinySynthetic(root)
        yield root


def test_the_knn_monitor_evaluates_the_teacher_while_the_student_differs(
    video_dir: Path, frame_cache: Path, toy_root: Path, tmp_path: Path
) -> None:
    """With `momentum_teacher = 1` the teacher keeps its initial weights while a fast student moves away:
    every logged k-NN equals the first (and `extract` + `knn` of the exported teacher), and the student's own
    k-NN, measured the same way, is another number."""
    config = tiny_config(
        video_dir,
        frame_cache,
        max_steps=4,
        eval_every=2,
        eval_dataset=TOY,
        eval_root=str(toy_root),
        momentum_teacher=1.0,
        base_lr=0.5,
    )
    run_dir = tmp_path / "run"
    with registered_dataset(TOY, _TinySynthetic):
        train(config, run_dir)
        log = [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]
        evaluated = [(r["step"], r["knn_acc"], r["knn_f1"]) for r in log if "knn_acc" in r]
        assert [step for step, _, _ in evaluated] == [0, 2, 4]

        saved = load_training_checkpoint(run_dir / CHECKPOINT_NAME)
        model = PLStitchModel(config)
        model.load_state_dict(saved["model"])
        student = model.student["backbone"].vit.state_dict()
        teacher = model.teacher["backbone"].vit.state_dict()
        moved = max(float((student[n] - teacher[n]).abs().max()) for n in teacher)
        assert moved > 1e-2  # the student and teacher differ

        options = ExtractOptions(fps=1.0, device="cpu", precision="fp32", num_workers=0, progress=False)
        extract_features(TOY, load_encoder(str(run_dir)), tmp_path / "teacher", options, root=toy_root)
        metrics = run_knn(tmp_path / "teacher")["metrics"]  # the docs' network: the teacher (backbone/)
        assert evaluated[-1][1:] == pytest.approx((metrics["accuracy"], metrics["macro_f1_video"]), abs=1e-9)
        assert len({(acc, f1) for _, acc, f1 in evaluated}) == 1  # the teacher did not move

        monitor = KnnMonitor(config, tmp_path / "student-eval", is_main=True)
        monitor.prepare(0)
        student_scores = monitor.measure(model.student["backbone"].vit, 4, torch.device("cpu"), "fp32")
        assert not np.isclose(student_scores["knn_f1"], evaluated[-1][2]) or not np.isclose(
            student_scores["knn_acc"], evaluated[-1][1]
        )  # the student's k-NN is another number: evaluating it instead would show
