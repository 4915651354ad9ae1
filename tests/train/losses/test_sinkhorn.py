"""Sinkhorn-Knopp teacher targets: against a scaling-vector formulation written here, their marginals, the
iBOT loss with them, and a 2-rank gloo run under torchrun equal to one process over the whole batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.errors import ConfigError
from plstitch_train.config import LossConfig
from plstitch_train.losses.ibot import IBOTLoss
from plstitch_train.losses.sinkhorn import sinkhorn_knopp


def scaling_reference(logits: torch.Tensor, temperature: float, iterations: int) -> torch.Tensor:
    """The same targets as diag(a) M diag(b): b gives each prototype 1/K of the mass, then a each row 1/B."""
    m = torch.exp(logits.double() / temperature)
    rows, protos = m.shape
    a = torch.ones(rows, dtype=torch.float64)
    b = torch.ones(protos, dtype=torch.float64)
    for _ in range(iterations):
        b = (1.0 / protos) / (m * a[:, None]).sum(0)
        a = (1.0 / rows) / (m * b[None, :]).sum(1)
    return rows * a[:, None] * m * b[None, :]


@pytest.mark.parametrize("iterations", [1, 3, 10])
def test_matches_the_scaling_vector_formulation(iterations: int) -> None:
    logits = torch.randn(24, 16, generator=torch.Generator().manual_seed(iterations)) * 0.5
    got = sinkhorn_knopp(logits, 0.1, iterations)
    torch.testing.assert_close(got.double(), scaling_reference(logits, 0.1, iterations), rtol=1e-4, atol=1e-7)


def test_rows_are_distributions_and_prototypes_share_the_batch() -> None:
    logits = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    targets = sinkhorn_knopp(logits, 0.5, n_iterations=200)
    torch.testing.assert_close(targets.sum(1), torch.ones(64))
    torch.testing.assert_close(targets.sum(0), torch.full((8,), 64 / 8), rtol=1e-3, atol=1e-3)
    # a collapsed teacher (every row the same) gets uniform targets, whatever its one output favours
    same = torch.randn(1, 8).expand(10, 8)
    torch.testing.assert_close(sinkhorn_knopp(same, 0.04), torch.full((10, 8), 1 / 8))
    # sharp logits neither overflow nor underflow (log domain): rows still sum to 1
    sharp = sinkhorn_knopp(logits * 100, 0.04)
    assert torch.isfinite(sharp).all()
    torch.testing.assert_close(sharp.sum(1), torch.ones(64))


def test_ibot_loss_with_sinkhorn_targets_and_no_centre_update() -> None:
    """Cross-entropy against SK targets: CLS over all images, patches over the masked ones of each view."""
    gen = torch.Generator().manual_seed(1)
    batch, n_patch, dim = 3, 5, 12
    s_cls, t_cls = torch.randn(2 * batch, dim, generator=gen), torch.randn(2 * batch, dim, generator=gen)
    s_patch = torch.randn(2 * batch, n_patch, dim, generator=gen)
    t_patch = torch.randn(2 * batch, n_patch, dim, generator=gen)
    masks = torch.rand(2 * batch, n_patch, generator=gen) < 0.5
    masks[:, 0] = True
    loss_fn = IBOTLoss(dim, dim, centering="sinkhorn_knopp", teacher_patch_temp=0.07, warmup_epochs=0)
    out = loss_fn(s_cls, s_patch, t_cls, t_patch, masks, epoch=0)

    q_cls = scaling_reference(t_cls, 0.04, 3).float().chunk(2)
    q_patch = torch.zeros(2 * batch, n_patch, dim)
    q_patch[masks] = scaling_reference(t_patch[masks], 0.07, 3).float()
    log_cls = F.log_softmax(s_cls / 0.1, -1).chunk(2)
    log_patch = F.log_softmax(s_patch / 0.1, -1).chunk(2)
    m = masks.float().chunk(2)
    q_patch = q_patch.chunk(2)
    cls = sum(-(q_cls[a] * log_cls[1 - a]).sum(-1).mean() for a in range(2)) / 2
    patch = (
        sum(((-(q_patch[v] * log_patch[v]).sum(-1) * m[v]).sum(-1) / m[v].sum(-1)).mean() for v in range(2))
        / 2
    )
    torch.testing.assert_close(out["cls"], cls, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["patch"], patch, rtol=1e-4, atol=1e-5)
    assert loss_fn.center.abs().sum() == 0 and loss_fn.center2.abs().sum() == 0  # no EMA centre with SK


def test_the_loss_section_names_the_centering() -> None:
    assert LossConfig().centering == "center"  # iBOT's, as published
    assert IBOTLoss.from_settings(LossConfig(centering="sinkhorn_knopp"), 8, 2).centering == "sinkhorn_knopp"
    with pytest.raises(ConfigError, match="centering 'sk' unknown; use one of center, sinkhorn_knopp"):
        LossConfig(centering="sk")


def test_two_ranks_equal_one_process_over_the_whole_batch(tmp_path: Path) -> None:
    script = tmp_path / "sk.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import torch, torch.distributed as dist
            from plstitch_train.losses.sinkhorn import sinkhorn_knopp
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            logits = torch.randn(10, 6, generator=torch.Generator().manual_seed(7))
            mine = sinkhorn_knopp(logits[rank * 4 : rank * 4 + 4 + 2 * rank], 0.1)
            torch.save(mine, r"{tmp_path}/rank%d.pt" % rank)
            dist.destroy_process_group()
            """
        )
    )
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = subprocess.run([*command, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = torch.cat([torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)])  # 4 rows + 6 rows
    logits = torch.randn(10, 6, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(got, sinkhorn_knopp(logits, 0.1), rtol=1e-5, atol=1e-7)
