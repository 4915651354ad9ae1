"""The licence of a published probe: the most restrictive of its backbone's and its training data's.

Why: a head trained on a non-commercial dataset's features, or on a non-commercial backbone, carries those
terms; the card must not offer it under a freer licence than either. Licences are ranked by what they forbid
(permissive < share-alike < non-commercial < non-commercial share-alike < no derivatives < custom <
unknown, and within a class by what each asks); a licence with no Hugging Face id becomes ``other`` and one
nobody stated ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Hugging Face licence ids by rank; a licence text is read as the id whose words it spells
_RANKS: tuple[tuple[str, ...], ...] = (
    ("cc0-1.0", "mit", "bsd-2-clause", "bsd-3-clause", "apache-2.0", "cc-by-4.0"),
    ("cc-by-sa-4.0", "lgpl-3.0", "gpl-3.0", "agpl-3.0"),
    ("cc-by-nc-4.0",),
    ("cc-by-nc-sa-4.0",),
    ("cc-by-nd-4.0", "cc-by-nc-nd-4.0"),
)
OTHER, UNKNOWN = "other", "unknown"
NO_WEIGHTS = "n/a (no weights)"  # a built-in encoder: no terms of its own


@dataclass(frozen=True)
class LicenceSource:
    """One licence that binds the probe: what it covers (``backbone X``, ``dataset Y``), its text, where it
    is stated."""

    what: str
    licence: str
    source: str = ""


@dataclass(frozen=True)
class CardLicence:
    """The card's `license` (a Hugging Face id, ``other`` or ``unknown``), its `license_name` for ``other``,
    and every licence it was chosen from."""

    license: str
    license_name: str | None
    sources: tuple[LicenceSource, ...]


def licence_id(text: str | None) -> str:
    """The Hugging Face id of a licence text (``CC-BY-NC-SA-4.0`` -> ``cc-by-nc-sa-4.0``; ``MIT`` ->
    ``mit``); ``unknown`` for none; ``other`` for a licence of its own (e.g. ``DINOv3 License``)."""
    words = "-".join(re.findall(r"[a-z0-9.]+", (text or "").lower()))
    if not words or words in {"unknown", "none", "n-a"}:
        return UNKNOWN
    known = {name for rank in _RANKS for name in rank}
    if words in known:
        return words
    return OTHER


def _rank(licence_id_: str) -> tuple[int, int]:
    """(class, place in it): within a class, later ids ask more (Apache-2.0's notices over MIT's)."""
    for rank, names in enumerate(_RANKS):
        if licence_id_ in names:
            return rank, names.index(licence_id_)
    return len(_RANKS) + (licence_id_ == UNKNOWN), 0  # other, then unknown: the most restrictive


def strictest_licence(sources: Sequence[LicenceSource]) -> CardLicence:
    """The most restrictive of `sources` (a built-in encoder's ``n/a`` binds nothing). A licence of its own
    gives ``other``, named in `license_name` by the licences it stands for."""
    binding = [s for s in sources if s.licence != NO_WEIGHTS]
    if not binding:
        return CardLicence(UNKNOWN, None, tuple(sources))
    ids = [licence_id(s.licence) for s in binding]
    chosen = max(ids, key=_rank)
    name = None
    if chosen == OTHER:
        texts = sorted({s.licence for s, i in zip(binding, ids, strict=True) if i == OTHER})
        name = "-".join(re.findall(r"[a-z0-9]+", " and ".join(texts).lower()))[:60]
    return CardLicence(chosen, name, tuple(sources))
