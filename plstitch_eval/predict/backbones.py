"""The encoders of a predict run, one per backbone its probes are on (`ProbeSet.backbone_of`), and the check
that they can share one decode of each video.

Why: probes on different backbones run side by side in the same decode; each backbone's encoder gets its own
crops (`prepare_frame` with its own `FramePlan`) of the same decoded frame, so the frame rate, the size frames
are decoded at, the black-margin cropping and the decoder must agree (`extract.shared.decode_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from plstitch_eval.data.decoders import recorded_decoder
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract.shared import decode_key
from plstitch_eval.predict.encoder import ProbeEncoder, load_probe_encoder
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.predict.probeset import ProbeSet

ONE_PER_BACKBONE = "run one plstitch predict per backbone"


def load_backbones(probes: ProbeSet, options: PredictOptions) -> list[ProbeEncoder]:
    """Each backbone's encoder, loaded for (and checked against) its first probe; the temporal head's
    progression comes from the first backbone alone (one `progression` column per video)."""
    models = []
    for g, lead in enumerate(probes.leads):
        models.append(load_probe_encoder(lead, options if g == 0 else replace(options, progression=False)))
    check_shared_decode(probes, models, options.decoder)
    return models


def check_shared_decode(probes: ProbeSet, models: Sequence[ProbeEncoder], decoder: str | None) -> None:
    """Refuse in one line (naming both probes and the fix) backbones whose frames cannot come from one
    decode: another decode size or black-margin cropping, or (without `--decoder`) another decoder."""
    leads = probes.leads
    first, first_key = leads[0], decode_key(models[0].plan)
    for lead, model in zip(leads[1:], models[1:], strict=True):
        key = decode_key(model.plan)
        if key != first_key:
            what = "black-margin cropping" if key[3] != first_key[3] else "decode size (resize on decode)"
            raise ConfigError(
                f"--probe {first.name} and --probe {lead.name} need frames decoded differently ({what}); "
                f"probes of one run share one decode: {ONE_PER_BACKBONE}."
            )
        ours, theirs = recorded_decoder(first.preprocessing), recorded_decoder(lead.preprocessing)
        if decoder is None and ours != theirs:
            raise ConfigError(
                f"--probe {first.name} and --probe {lead.name} were made with different decoders ({ours} vs "
                f"{theirs}); probes of one run share one decode: pass --decoder {ours} (or {theirs}), or "
                f"{ONE_PER_BACKBONE}."
            )


def as_encoders(model: ProbeEncoder | Sequence[ProbeEncoder], probes: ProbeSet) -> list[ProbeEncoder]:
    """A run's encoders as a list, one per backbone of `probes` (a lone encoder: the one backbone's)."""
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    if len(models) != probes.backbones:
        raise ConfigError(
            f"{probes.backbones} backbones among the probes but {len(models)} encoders; load one per "
            "backbone (predict.backbones.load_backbones)."
        )
    return models


def spec_names(models: Sequence[ProbeEncoder]) -> str:
    """The encoders' specs as the figures' title names them: `tiny` or `tiny + raw-pixels`."""
    return " + ".join(m.spec for m in models)
