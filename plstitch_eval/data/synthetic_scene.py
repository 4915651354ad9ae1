"""Rendering of synthetic v3: a laparoscopic-cholecystectomy-like scene, drawn with vectorised numpy.

What each element is for (which objective it exercises) is listed in docs/synthetic.md.
"""

from __future__ import annotations

import numpy as np

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_TOOLS

N_PHASES = 7
N_CLIPS = 3
N_BURNS = 24
PAN = 3.0 / 64  # max camera pan as a share of the frame side; frames 2 s apart move by < 1 px at 64 px
NOISE_BANK = 31
CONTENT_FPS = 5.0  # the scene changes 5 times a second; frames in between differ only by noise and flicker
# tool: (shaft colour, shaft width and tip size as shares of the frame side, tip kind, tip colour)
TOOLS = {
    "grasper": ((175, 178, 190), 0.045, "jaw", (175, 178, 190)),
    "hook": ((70, 72, 82), 0.035, "hook", (230, 230, 235)),
    "clipper": ((150, 150, 160), 0.06, "clip", (200, 200, 60)),
    "irrigator": ((40, 40, 48), 0.055, "flat", (40, 40, 48)),
}
# instrument-presence labels in Cholec80's tool order; the drawn tools map to their Cholec80 namesakes, the
# bag is "SpecimenBag" while it covers part of the field of view, bipolar and scissors are never drawn
TOOL_COLUMNS = tuple(CHOLEC80_TOOLS)
TOOL_COLUMN_OF = {"grasper": "Grasper", "hook": "Hook", "clipper": "Clipper", "irrigator": "Irrigator"}
BAG_VISIBLE = 0.02  # share of the field of view the bag must cover to count as present
# per phase: (tool, mean entry angle in degrees from the frame centre - 0 = right, 90 = bottom -, presence)
PHASE_TOOLS = (
    (("grasper", 215, 0.35),),
    (("grasper", 200, 0.85), ("hook", 330, 0.8)),
    (("grasper", 200, 0.8), ("clipper", 330, 0.85)),
    (("grasper", 200, 0.85), ("hook", 330, 0.8)),
    (("grasper", 200, 0.9),),
    (("irrigator", 330, 0.85), ("grasper", 200, 0.4)),
    (("grasper", 300, 0.85),),
)
DUCT_COLOUR = np.array([200, 185, 150], np.float32)
BED_COLOUR = np.array([120, 40, 40], np.float32)
BURN_COLOUR = np.array([45, 30, 25], np.float32)
CLIP_COLOUR = np.array([235, 235, 245], np.float32)
FLUID_COLOUR = np.array([225, 200, 200], np.float32)
BAG_COLOUR = np.array([235, 235, 220], np.float32)
LIVER_REACH = (0.24, 0.42)  # a paced scene's liver edge (share of the side) for the shortest and longest case
GB_SIZE = ((0.15, 0.085), (0.23, 0.125))  # ... and its gallbladder's half-axes


def smooth_path(
    rng: np.random.Generator, seconds: np.ndarray, amplitude: float, periods: tuple[float, ...]
) -> np.ndarray:
    """A slow 2-D wander [n, 2] bounded by `amplitude`: a sum of sinusoids of the given periods (s)."""
    out = np.zeros((len(seconds), 2), np.float32)
    for period in periods:
        p = period * rng.uniform(0.7, 1.3, 2)
        phase = rng.uniform(0, 2 * np.pi, 2)
        out += np.sin(2 * np.pi * seconds[:, None] / p + phase) * amplitude / len(periods)
    return out


def on_off(
    rng: np.random.Generator, seconds: np.ndarray, presence: float, mean_seconds: float = 6.0
) -> np.ndarray:
    """Whether a tool is in view per frame: on/off stretches of seconds, on for ~`presence` of the time."""
    out = np.zeros(len(seconds), bool)
    start, state = 0.0, rng.random() < presence
    end_time = seconds[-1] if len(seconds) else 0.0
    while start <= end_time:
        share = presence if state else 1.0 - presence
        length = rng.exponential(2 * mean_seconds * share) + 0.5
        out[(seconds >= start) & (seconds < start + length)] = state
        start += length
        state = rng.random() < presence
    return out


def disc(x: np.ndarray, y: np.ndarray, centre: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Anti-aliased coverage of discs: `centre` [2] or [B, 2] (then x, y are [B, h, w])."""
    centre = np.asarray(centre, np.float32)
    if centre.ndim == 1:
        return np.clip(0.5 - (np.hypot(x - centre[0], y - centre[1]) - radius), 0, 1).astype(np.float32)
    radius = np.broadcast_to(np.asarray(radius, np.float32), (len(centre),))[:, None, None]
    d = np.hypot(x - centre[:, 0, None, None], y - centre[:, 1, None, None])
    return np.clip(0.5 - (d - radius), 0, 1).astype(np.float32)


def segment(x: np.ndarray, y: np.ndarray, start: np.ndarray, end: np.ndarray, width: float) -> np.ndarray:
    """Anti-aliased coverage of thick segments; `start`/`end` [2] or [B, 2] (x, y: [B, h, w])."""
    start, end = np.asarray(start, np.float32), np.asarray(end, np.float32)
    if start.ndim == 2 or end.ndim == 2:
        start = np.broadcast_to(start, np.broadcast_shapes(start.shape, end.shape))
        end = np.broadcast_to(end, start.shape)
        sx, sy = start[:, 0, None, None], start[:, 1, None, None]
        ex, ey = end[:, 0, None, None] - sx, end[:, 1, None, None] - sy
    else:
        sx, sy = start
        ex, ey = end - start
    px, py = x - sx, y - sy
    t = np.clip((px * ex + py * ey) / np.maximum(ex * ex + ey * ey, 1e-6), 0.0, 1.0)
    dist = np.sqrt((px - t * ex) ** 2 + (py - t * ey) ** 2) - width / 2
    return np.clip(0.5 - dist, 0.0, 1.0).astype(np.float32)


def ellipse(x: np.ndarray, y: np.ndarray, centre: np.ndarray, axes: np.ndarray, angle: float) -> np.ndarray:
    """Coverage of ellipses; `centre` [B, 2], `axes` [B, 2] (x, y are [B, h, w])."""
    ca, sa = np.cos(angle), np.sin(angle)
    dx, dy = x - centre[:, 0, None, None], y - centre[:, 1, None, None]
    u, v = dx * ca + dy * sa, -dx * sa + dy * ca
    a, b = axes[:, 0, None, None], axes[:, 1, None, None]
    r = np.sqrt((u / a) ** 2 + (v / b) ** 2)
    return np.clip((1.0 - r) * b, 0, 1).astype(np.float32)


def blend(image: np.ndarray, alpha: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Alpha-composite a flat colour over `image` [..., 3] in place with coverage `alpha` [...]."""
    image -= alpha[..., None] * (image - colour)
    return image


def _colour(rng: np.random.Generator, low: list[float], high: list[float], pace: float | None) -> np.ndarray:
    """A per-video colour: uniform in [low, high], or (drawn all the same, to keep the stream) by pace."""
    drawn = rng.uniform(low, high)
    if pace is not None:
        drawn = np.asarray(low) + (np.asarray(high) - np.asarray(low)) * pace
    return drawn.astype(np.float32)


def in_phase_progress(phases: np.ndarray) -> np.ndarray:
    """Each frame's progress within its phase, 0 at the phase's first frame (phases sorted, as generated)."""
    starts = np.searchsorted(phases, np.arange(N_PHASES))
    ends = np.searchsorted(phases, np.arange(N_PHASES), side="right")
    length = np.maximum(ends - starts, 1)
    return ((np.arange(len(phases)) - starts[phases]) / length[phases]).astype(np.float32)


def anatomy_state(phases: np.ndarray, in_phase: np.ndarray) -> dict[str, np.ndarray]:
    """The irreversible state of the anatomy per frame, from its phase and the progress within that phase.

    fat: share of fat still covering the triangle (cleared during Calot dissection); clips: clips placed;
    cut: duct divided; detach: gallbladder freed from the liver bed; in_bag: gallbladder in the bag;
    bag_out: bag pulled out of the field.
    """
    p, q = phases, in_phase
    return {
        "fat": np.where(p == 0, 1.0, np.where(p == 1, 1.0 - 0.85 * q, 0.15)).astype(np.float32),
        "clips": np.where(
            p < 2, 0, np.where(p == 2, np.minimum(N_CLIPS, np.floor(q * 1.25 * N_CLIPS)), N_CLIPS)
        ),
        "cut": (p > 2) | ((p == 2) & (q > 0.85)),
        "detach": np.where(p < 3, 0.0, np.where(p == 3, q, 1.0)).astype(np.float32),
        "in_bag": np.where(p < 4, 0.0, np.where(p == 4, q, 1.0)).astype(np.float32),
        "bag_out": np.where(p < 6, 0.0, q).astype(np.float32),
    }


class Scene:
    """One video's random anatomy, camera and tools; `render(frame_ids)` draws uint8 RGB frames [B, S, S, 3].

    The scope's circular field of view is fixed in the frame; the scene pans slowly beneath it. Static
    layers (tissue, liver, liver bed, duct, fat, burn marks, clips, fluid) are drawn once on a canvas padded
    by the pan range and cropped per frame at an integer offset; moving parts (gallbladder once it detaches,
    bag, tools) are drawn per frame.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        size: int,
        phases: np.ndarray,
        fps: float,
        pace: float | None = None,
        skill: float | None = None,
    ) -> None:
        """`pace` in [0, 1] (a paced set's case length, short to long) sets the tissue colours, the liver's
        reach and the gallbladder's size - a long case looks inflamed, with a large liver and a distended
        gallbladder - in place of their random draws (still drawn, so all else is the unpaced scene).
        `skill` in [0, 1] (a skilled set's surgeon) sets how the instruments move: a novice's tips wander
        up to three times as far from the work site and twice as fast as an expert's (same draws)."""
        s = float(size)
        self.size, self.phases = size, phases
        self.hold = max(1, int(round(fps / CONTENT_FPS)))
        n = len(phases)
        seconds = np.arange(n) / fps
        self.progress = np.linspace(0.0, 1.0, n, dtype=np.float32)
        self.in_phase = in_phase_progress(phases)
        self.state = anatomy_state(phases, self.in_phase)
        # camera: integer pan of the scene under a fixed scope circle
        self.margin = int(np.ceil(PAN * s)) + 1
        self.pan = np.rint(smooth_path(rng, seconds, PAN * s, (30.0, 60.0))).astype(np.int64)
        fov_centre = np.array([s / 2, s / 2]) + rng.uniform(-0.03, 0.03, 2) * s
        fov_radius = rng.uniform(0.44, 0.5) * s
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
        self.xx, self.yy = xx, yy
        d = np.hypot(xx - fov_centre[0], yy - fov_centre[1]) / fov_radius
        fov = np.clip((1.0 - d) * fov_radius, 0, 1)
        self.lens = (fov * (1.0 - 0.45 * np.clip(d, 0, 1) ** 2)).astype(np.float32)[None, ..., None]
        self.fov = fov.astype(np.float32)[None, ..., None]
        self.fov_centre, self.fov_radius = fov_centre, fov_radius
        # per-video colours: white balance, tissue, liver, fat, gallbladder, and a drift with progress
        self.gain = rng.uniform(0.8, 1.2, 3).astype(np.float32)
        if pace is not None:  # one theatre's calibrated tower: colours mean the same in every case
            self.gain = np.ones(3, np.float32)
        tissue = _colour(rng, [150, 60, 55], [205, 100, 90], pace)
        self.liver_colour = _colour(rng, [95, 30, 25], [140, 55, 45], pace)
        self.fat_colour = _colour(rng, [200, 170, 90], [235, 205, 130], pace)
        self.gb_colour = _colour(rng, [70, 110, 50], [110, 150, 80], pace)
        self.drift = rng.uniform([-30, 5, 0], [-15, 25, 15]).astype(np.float32)
        # static layers on the padded canvas, in scene coordinates (canvas pixel + offset = scene position)
        m = self.margin
        pad = size + 2 * m
        cy, cx = np.mgrid[0:pad, 0:pad].astype(np.float32) + 0.5 - m
        texture = np.zeros((pad, pad), np.float32)
        for _ in range(3):
            fx, fy = rng.uniform(1, 4, 2) * 2 * np.pi / s
            texture += 7.0 * np.sin(fx * cx + fy * cy + rng.uniform(0, 2 * np.pi))
        self.tissue = tissue + texture[..., None]
        liver_edge = rng.uniform(0.28, 0.38) * s
        if pace is not None:
            liver_edge = (LIVER_REACH[0] + (LIVER_REACH[1] - LIVER_REACH[0]) * pace) * s
        wave_f, wave_phase, wave_amp = (
            rng.uniform(1, 3) * 2 * np.pi / s,
            rng.uniform(0, 2 * np.pi),
            rng.uniform(1, 3),
        )
        self.liver = np.clip(liver_edge + wave_amp * np.sin(wave_f * cx + wave_phase) - cy + 0.5, 0, 1)
        self.gb_centre = np.array([rng.uniform(0.4, 0.6) * s, liver_edge + rng.uniform(0.1, 0.16) * s])
        self.gb_axes = np.array([rng.uniform(0.16, 0.22), rng.uniform(0.09, 0.12)]) * s
        if pace is not None:
            self.gb_axes = (np.array(GB_SIZE[0]) + (np.array(GB_SIZE[1]) - np.array(GB_SIZE[0])) * pace) * s
        self.gb_angle = rng.uniform(-0.4, 0.4)
        home = ellipse(cx[None], cy[None], self.gb_centre[None], self.gb_axes[None], self.gb_angle)[0]
        self.gb_home = home
        self.bed = np.clip(home * 3 / max(self.gb_axes[1], 1), 0, 1) * 0.7
        direction = np.array([np.cos(self.gb_angle), np.sin(self.gb_angle)])
        neck = self.gb_centre - direction * self.gb_axes[0] * 0.9
        duct_end = neck + np.array([-0.05, 0.2]) * s
        duct = segment(cx, cy, neck, duct_end, 0.035 * s)
        gap = disc(cx, cy, neck + (duct_end - neck) * 0.55, 0.025 * s)
        self.duct, self.duct_cut = duct * 0.9, duct * (1 - gap) * 0.9
        self.fat = np.maximum(disc(cx, cy, (neck + duct_end) / 2, 0.16 * s), home * 0.8) * 0.85
        clip_at = [neck + (duct_end - neck) * f for f in (0.25, 0.45, 0.65)]
        self.clips = [
            segment(cx, cy, c - np.array([0.03 * s, 0]), c + np.array([0.03 * s, 0]), 0.02 * s)
            for c in clip_at
        ]
        spots = rng.uniform(-1, 1, (N_BURNS, 2)) * self.gb_axes * 0.9 + self.gb_centre
        times = np.sort(rng.uniform(0, 1, N_BURNS))  # burn level (0.6 x progress) at which a mark appears
        self.burn_time = np.full((pad, pad), np.inf, np.float32)
        self.burn_alpha = np.zeros((pad, pad), np.float32)
        for spot, time in zip(spots[::-1], times[::-1], strict=True):  # earliest mark wins on overlap
            cover = disc(cx, cy, spot, 0.018 * s)
            hit = cover > 0
            self.burn_time[hit], self.burn_alpha[hit] = time, cover[hit] * 0.8
        fluid_at = rng.uniform(-1, 1, (6, 2)) * np.array([0.25, 0.12]) * s + self.gb_centre
        self.fluid = np.max([disc(cx, cy, c, 0.03 * s) for c in fluid_at], axis=0) * 0.6
        self.bag_home = np.array([rng.uniform(0.62, 0.75), rng.uniform(0.62, 0.75)]) * s
        # tools: phase, kind, entry angle (per video) and a tip wandering around the work site
        self.tools = []
        reach, tempo = (1.0, 1.0) if skill is None else (1.8 - 1.2 * skill, 0.5 + 0.5 * skill)
        for phase, spec in enumerate(PHASE_TOOLS):
            for kind, angle, presence in spec:
                a = np.deg2rad(angle + rng.uniform(-20, 20))
                base = fov_centre + 1.3 * fov_radius * np.array([np.cos(a), np.sin(a)])
                target = self.gb_centre + rng.uniform(-0.1, 0.1, 2) * s
                tips = target + smooth_path(rng, seconds, 0.12 * s * reach, (6.0 * tempo, 14.0 * tempo))
                self.tools.append((phase, kind, base, tips, on_off(rng, seconds, presence)))
        self.flicker = rng.normal(1.0, 0.03, n).astype(np.float32)
        self.noise_bank = rng.normal(0.0, 5.0, (NOISE_BANK, size, size, 3)).astype(np.float32)
        self.noise_pick = rng.integers(0, NOISE_BANK, n)

    def _crop(self, layer: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Per-frame crops [B, S, S(, C)] of a canvas layer at the frames' pan offsets."""
        return layer[rows[:, :, None], cols[:, None, :]]

    def render(self, ids: np.ndarray) -> np.ndarray:
        """Frames `ids` as uint8 RGB [B, S, S, 3]: scene at its content rate, noise + flicker per frame."""
        keys = ids - ids % self.hold
        unique, inverse = np.unique(keys, return_inverse=True)
        image = self._render_content(unique)[inverse]
        image *= self.flicker[ids, None, None, None]
        image += self.noise_bank[self.noise_pick[ids]] * self.fov
        return np.clip(image, 0, 255).astype(np.uint8)

    def _render_content(self, ids: np.ndarray) -> np.ndarray:
        """The noiseless scene at frames `ids`, float32 [B, S, S, 3]."""
        s, m = float(self.size), self.margin
        offsets = np.arange(self.size)
        pan = self.pan[ids]
        rows = offsets[None] + m + pan[:, 1, None]
        cols = offsets[None] + m + pan[:, 0, None]
        x = self.xx[None] + pan[:, 0, None, None]  # scene coordinates of every pixel
        y = self.yy[None] + pan[:, 1, None, None]
        state = {k: v[ids] for k, v in self.state.items()}
        phases, progress = self.phases[ids], self.progress[ids]
        image = self._crop(self.tissue, rows, cols) + (progress[:, None] * self.drift)[:, None, None]
        blend(image, self._crop(self.liver, rows, cols), self.liver_colour)
        blend(image, self._crop(self.bed, rows, cols) * state["detach"][:, None, None], BED_COLOUR)
        duct = np.where(
            state["cut"][:, None, None],
            self._crop(self.duct_cut, rows, cols),
            self._crop(self.duct, rows, cols),
        )
        blend(image, duct * (1.0 - state["fat"])[:, None, None], DUCT_COLOUR)
        # gallbladder: at home until it detaches, then slides down and into the bag, shrinking
        moving = state["detach"] > 0
        gb = self._crop(self.gb_home, rows, cols)
        if moving.any():
            shift = state["detach"][moving, None] * np.array([0.04, 0.1]) * s
            into_bag = self.bag_home - self.gb_centre - np.array([0.04, 0.1]) * s
            centre = self.gb_centre + shift + state["in_bag"][moving, None] * into_bag
            axes = self.gb_axes[None] * (1.0 - 0.6 * state["in_bag"][moving, None])
            gb[moving] = ellipse(x[moving], y[moving], centre, axes, self.gb_angle)
            gb[moving] *= (1.0 - state["in_bag"][moving] ** 3)[:, None, None]
        blend(image, gb, self.gb_colour)
        blend(image, self._crop(self.fat, rows, cols) * state["fat"][:, None, None], self.fat_colour)
        burn_level = np.clip(progress * 1.6, 0, 1)
        burned = self._crop(self.burn_time, rows, cols) < burn_level[:, None, None]
        blend(image, self._crop(self.burn_alpha, rows, cols) * burned, BURN_COLOUR)
        for c, layer in enumerate(self.clips):
            placed = np.flatnonzero(state["clips"] > c)
            if len(placed):
                image[placed] = blend(
                    image[placed], self._crop(layer, rows[placed], cols[placed]), CLIP_COLOUR
                )
        wet = np.flatnonzero(phases >= 5)
        if len(wet):
            image[wet] = blend(image[wet], self._crop(self.fluid, rows[wet], cols[wet]), FLUID_COLOUR)
        bagged = np.flatnonzero(phases >= 4)
        if len(bagged):
            centre = self.bag_home + state["bag_out"][bagged, None] * np.array([0.45, 0.35]) * s
            image[bagged] = blend(
                image[bagged], disc(x[bagged], y[bagged], centre, 0.13 * s) * 0.9, BAG_COLOUR
            )
        self._draw_tools(image, ids, phases, pan)
        image *= self.gain
        image *= self.lens
        return image

    def tool_presence(self, ids: np.ndarray) -> np.ndarray:
        """What the frames `ids` show, as uint8 [B, 7] in `TOOL_COLUMNS` order: a drawn tool is present when
        `_draw_tools` draws it; the bag when it covers `BAG_VISIBLE` of the field of view, as rendered.
        """
        keys = ids - ids % self.hold  # the content frame `render` draws
        phases = self.phases[keys]
        out = np.zeros((len(ids), len(TOOL_COLUMNS)), np.uint8)
        for phase, kind, _base, _tips, present in self.tools:
            column = TOOL_COLUMNS.index(TOOL_COLUMN_OF[kind])
            out[:, column] |= ((phases == phase) & present[keys]).astype(np.uint8)
        bagged = np.flatnonzero(phases >= 4)
        if len(bagged):
            s = float(self.size)
            pan = self.pan[keys[bagged]]
            x = self.xx[None] + pan[:, 0, None, None]
            y = self.yy[None] + pan[:, 1, None, None]
            centre = self.bag_home + self.state["bag_out"][keys[bagged], None] * np.array([0.45, 0.35]) * s
            cover = (disc(x, y, centre, 0.13 * s) * self.fov[..., 0]).sum(axis=(1, 2))
            out[bagged, TOOL_COLUMNS.index("SpecimenBag")] = cover > BAG_VISIBLE * self.fov.sum()
        return out

    def _draw_tools(self, image: np.ndarray, ids: np.ndarray, phases: np.ndarray, pan: np.ndarray) -> None:
        """Instruments enter from the scope's edge (fixed in the frame); their tips follow the scene."""
        s = float(self.size)
        xs, ys = self.xx[None], self.yy[None]
        for phase, kind, base, tips, present in self.tools:
            sel = np.flatnonzero((phases == phase) & present[ids])
            if not len(sel):
                continue
            shaft_colour, width, tip_kind, tip_colour = TOOLS[kind]
            shaft_colour, tip_colour = np.array(shaft_colour, np.float32), np.array(tip_colour, np.float32)
            tip = tips[ids[sel]] - pan[sel]
            part = blend(image[sel], segment(xs, ys, base, tip, width * s), shaft_colour)
            direction = (tip - base) / np.linalg.norm(tip - base, axis=1, keepdims=True)
            normal = np.stack([-direction[:, 1], direction[:, 0]], 1)
            if tip_kind == "jaw":
                for side in (-1, 1):
                    end = tip + direction * 0.06 * s + side * normal * 0.035 * s
                    part = blend(part, segment(xs, ys, tip, end, 0.025 * s), tip_colour)
            elif tip_kind == "hook":
                part = blend(part, segment(xs, ys, tip, tip + normal * 0.05 * s, 0.02 * s), tip_colour)
            elif tip_kind == "clip":
                part = blend(part, segment(xs, ys, tip, tip + direction * 0.05 * s, 0.06 * s), tip_colour)
            image[sel] = part
