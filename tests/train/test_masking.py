"""Block-wise mask generator: counts, rectangles, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from plstitch_eval.errors import ConfigError
from plstitch_train.masking import BlockMaskGenerator, _Draws


def test_defaults_follow_reference() -> None:
    generator = BlockMaskGenerator()
    assert generator.grid == (14, 14)
    assert generator.min_num_patches == 16  # (min(H, W) // 3) ** 2
    assert generator.max_aspect == pytest.approx(1 / 0.3)
    mask = generator(0)
    assert mask.dtype == torch.bool and mask.shape == (14, 14)


def test_ratio_within_expected_range_over_many_draws() -> None:
    generator = BlockMaskGenerator(ratio=0.3)
    counts = np.array([int(generator(torch.Generator().manual_seed(i)).sum()) for i in range(300)])
    target = 0.3 * 196
    assert counts.max() <= int(target)  # never overshoots the target count
    assert counts.min() >= 0.6 * target  # the algorithm gets close: blocks fill the remaining budget
    assert abs(counts.mean() - target) < 0.08 * target


def test_ratio_range_is_drawn_per_mask() -> None:
    generator = BlockMaskGenerator(ratio=(0.1, 0.5))
    counts = np.array([int(generator(seed).sum()) for seed in range(300)])
    assert counts.max() <= int(0.5 * 196)
    assert counts.min() < 0.2 * 196 and counts.max() > 0.4 * 196  # the ratio really varies
    assert BlockMaskGenerator(ratio=0.0)(0).sum() == 0


def test_each_block_is_a_filled_rectangle() -> None:
    generator = BlockMaskGenerator(grid=(10, 12), ratio=0.5)
    draws = _Draws(np.random.default_rng(5))
    for _ in range(40):
        mask = np.zeros(generator.grid, dtype=bool)
        remaining = 0.5 * 120
        while True:
            before = mask.copy()
            added = generator._place_block(mask, remaining, draws)
            if added == 0:
                assert (mask == before).all()
                break
            new = mask & ~before
            assert new.sum() == added and 0 < added <= remaining
            rows, cols = np.nonzero(new)
            box = mask[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
            assert box.all()  # the new cells lie inside one rectangle that is now fully masked
            assert box.shape[0] < 10 and box.shape[1] < 12
            remaining -= added


def test_deterministic_with_a_seed_or_generator() -> None:
    generator = BlockMaskGenerator()
    assert torch.equal(generator(123), generator(123))
    assert torch.equal(
        generator(torch.Generator().manual_seed(7)), generator(torch.Generator().manual_seed(7))
    )
    assert torch.equal(generator(np.random.default_rng(9)), generator(np.random.default_rng(9)))
    different = [generator(seed) for seed in range(5)]
    assert any(not torch.equal(different[0], other) for other in different[1:])
    torch.manual_seed(3)
    first = generator()
    torch.manual_seed(3)
    assert torch.equal(first, generator())


def test_batch_helper() -> None:
    generator = BlockMaskGenerator(grid=(6, 8), ratio=0.4)
    masks = generator.batch(16, generator=11)
    assert masks.shape == (16, 6, 8) and masks.dtype == torch.bool
    assert torch.equal(masks, generator.batch(16, generator=11))
    assert len({tuple(m.flatten().tolist()) for m in masks}) > 1  # independent draws, not one mask repeated
    assert (masks.flatten(1).sum(1) <= int(0.4 * 48)).all()
    assert generator.batch(0).shape == (0, 6, 8)


def test_max_num_patches_caps_each_block(monkeypatch) -> None:
    generator = BlockMaskGenerator(grid=(14, 14), ratio=0.3, min_num_patches=4, max_num_patches=6)
    added_per_block = []
    place_block = BlockMaskGenerator._place_block

    def recording(self, mask, remaining, draws):
        added_per_block.append(place_block(self, mask, remaining, draws))
        return added_per_block[-1]

    monkeypatch.setattr(BlockMaskGenerator, "_place_block", recording)
    total = int(generator(0).sum())
    assert max(added_per_block) <= 6 and len(added_per_block) >= 58 // 6
    assert total == sum(added_per_block) and 0.6 * 58.8 <= total <= 58


def test_tiny_grid_and_bad_settings() -> None:
    generator = BlockMaskGenerator(grid=(4, 4), ratio=0.3)
    assert generator.min_num_patches == 1
    assert 1 <= int(generator(0).sum()) <= 4
    with pytest.raises(ConfigError, match="ratio"):
        BlockMaskGenerator(ratio=1.5)
    with pytest.raises(ConfigError, match="grid"):
        BlockMaskGenerator(grid=(0, 4))


@pytest.mark.parametrize("grid", [(6, 9), (9, 6), (14, 14)])
def test_every_cell_is_masked_in_some_draw(grid: tuple[int, int]) -> None:
    """Block positions reach every row and column, the last ones included (no off-by-one in the offsets)."""
    generator = BlockMaskGenerator(grid=grid, ratio=0.3)
    rng = np.random.default_rng(0)
    hits = torch.stack([generator(rng) for _ in range(400)]).sum(0)
    assert (hits > 0).all(), hits
    assert hits[-1].sum() > 0 and hits[:, -1].sum() > 0


def test_block_aspect_ratio_is_log_uniform_hence_symmetric() -> None:
    """log(aspect) uniform in (log 0.3, log 1/0.3): blocks as often taller than wide as wider than tall.

    A block is h = round(sqrt(area * ar)) by w = round(sqrt(area / ar)), so h > w iff ar > 1 (up to rounding).
    Log-uniform: P(ar > 1) = 1/2. A uniform draw of ar in (0.3, 3.33) would give (3.33 - 1) / 3.03 = 0.77
    before the grid-size rejections - far outside the tolerance below (the share's std here is about 0.01).
    """
    generator = BlockMaskGenerator(grid=(14, 14), ratio=0.3)
    draws = _Draws(1)
    taller = wider = 0
    for _ in range(3000):
        mask = np.zeros((14, 14), dtype=bool)
        assert generator._place_block(mask, 58.8, draws) > 0
        rows, cols = np.nonzero(mask)
        h, w = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        taller += int(h > w)
        wider += int(w > h)
    share = taller / (taller + wider)
    assert taller + wider > 2000  # most blocks are not square
    assert abs(share - 0.5) < 0.05, share


def _ibot_block_mask(rng: np.random.Generator, height: int, width: int, ratio: float) -> np.ndarray:
    """iBOT's block-wise masking (`ImageFolderMask.__getitem__`, after BEiT's `MaskingGenerator`), written
    here from its description, drawing from `rng` as `random.uniform` / `random.randint` would.

    Target `high = ratio * H * W` (a float, no rounding); while fewer are masked: up to 10 attempts of a block
    of area uniform in [(min(H, W) // 3) ** 2, high - count], log-uniform aspect in (0.3, 1 / 0.3),
    h = round(sqrt(area * aspect)), w = round(sqrt(area / aspect)), kept if h < H, w < W and it masks
    1..(high - count) new cells; stop when a block adds nothing. So at most floor(high) cells are masked.
    One difference in the random stream only: iBOT also draws a position for an empty block (h or w = 0,
    possible when under ~2 cells remain) before rejecting it; ours rejects it without drawing, so this
    reference skips that draw too. Such a block masks nothing in both.
    """

    def uniform(low: float, high: float) -> float:
        return low + (high - low) * float(rng.random())

    def randint(low: int, high: int) -> int:
        return int(rng.integers(low, high + 1))

    high = ratio * height * width
    low = (min(height, width) // 3) ** 2
    log_aspect = (math.log(0.3), math.log(1 / 0.3))
    mask = np.zeros((height, width), dtype=bool)
    count = 0
    while count < high:
        budget = high - count
        delta = 0
        for _attempt in range(10):
            area = uniform(low, budget)
            aspect = math.exp(uniform(*log_aspect))
            h = int(round(math.sqrt(area * aspect)))
            w = int(round(math.sqrt(area / aspect)))
            if h == 0 or w == 0 or h >= height or w >= width:
                continue
            top, left = randint(0, height - h), randint(0, width - w)
            new = sum(not mask[i, j] for i in range(top, top + h) for j in range(left, left + w))
            if 0 < new <= budget:
                for i in range(top, top + h):
                    for j in range(left, left + w):
                        mask[i, j] = True
                delta = new
                break
        if delta == 0:
            break
        count += delta
    return mask


@pytest.mark.parametrize("grid", [(14, 14), (7, 7), (6, 9), (9, 6), (12, 16), (3, 5)])
@pytest.mark.parametrize("ratio", [0.1, 0.3, 0.4, 0.5, 0.75])
def test_masked_patch_count_is_ibots_for_the_same_draws(grid: tuple[int, int], ratio: float) -> None:
    """Same random draws, same mask as iBOT's rule: the target is ratio x N itself, never one patch fewer."""
    generator = BlockMaskGenerator(grid=grid, ratio=ratio)
    target = math.floor(ratio * grid[0] * grid[1])  # the most iBOT ever masks (it never overshoots)
    counts = []
    for seed in range(25):
        got = generator(np.random.default_rng(seed)).numpy()
        expected = _ibot_block_mask(np.random.default_rng(seed), *grid, ratio)
        assert int(got.sum()) == int(expected.sum()), (seed, int(got.sum()), int(expected.sum()))
        assert np.array_equal(got, expected), seed
        counts.append(int(got.sum()))
    assert max(counts) == target  # the full ratio x N is reached (an off-by-one target stops one short)
