"""`toy-vit`: a tiny ViT encoder whose weights the user makes, a plstitch registry entry from another package.

Make its weights once, then use it like any registry model (`plstitch extract --model toy-vit`):

    python -m plstitch_toy_plugin.encoder            # into this package: weights/toy-vit/
    python -m plstitch_toy_plugin.encoder DIR        # elsewhere; then export PLSTITCH_TOY_VIT=DIR

Either way the folder is timm's format (config.json + model.safetensors, as `plstitch train` exports and the
shipped tiny models are): a 2-block, 32-wide ViT with 8 px patches on 32 px frames, seeded random weights
(a stand-in for weights you trained). The entry's `local_path` is relative, so it resolves inside this
package (the package of the module that created the entry), never inside plstitch; `$PLSTITCH_TOY_VIT`, when
set, wins. The entry point names `TOY_VIT` itself (`plstitch_toy_plugin.encoder:TOY_VIT`), so running this
module as a script registers nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.preprocess import DataConfig

NAME = "toy-vit"
PATH_ENV = "PLSTITCH_TOY_VIT"
WEIGHTS = "weights/toy-vit"  # relative: resolved inside this package
SIZE, PATCH, WIDTH, DEPTH, HEADS = 32, 8, 32, 2, 2

TOY_VIT = ModelEntry(
    name=NAME,
    architecture=f"vit_toy_patch{PATCH}_{SIZE}",
    feature_dim=WIDTH,  # the CLS token after the final norm
    converter="timm",  # a timm-format folder: plain timm.create_model("local-dir:...") loads it
    local_path=WEIGHTS,  # "weights/toy-vit": inside this package
    path_env=PATH_ENV,  # "PLSTITCH_TOY_VIT"
    license="MIT",
    license_source="plstitch-toy-plugin (pyproject.toml: MIT)",
    preprocessing_source="its timm config.json (written by make_weights)",
    citation="n/a (a toy)",
    description="Toy 2-block ViT (32 px) of plstitch-toy-plugin; `python -m plstitch_toy_plugin.encoder`.",
)


def default_weights_dir() -> Path:
    """Where the entry looks without `$PLSTITCH_TOY_VIT`: `weights/toy-vit` inside this package."""
    return Path(__file__).resolve().parent / WEIGHTS


def make_weights(folder: str | Path | None = None, seed: int = 0) -> Path:
    """Write the toy's timm-format folder (config.json + model.safetensors) and return it."""
    import timm
    import torch

    from plstitch_eval.hub import save_timm_dir

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = timm.create_model(
            "vit_tiny_patch16_224",
            pretrained=False,
            num_classes=0,
            img_size=SIZE,
            patch_size=PATCH,
            embed_dim=WIDTH,
            depth=DEPTH,
            num_heads=HEADS,
        )
    return save_timm_dir(model.eval(), folder or default_weights_dir(), DataConfig.for_size(SIZE))


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(f"usage: python -m plstitch_toy_plugin.encoder [DIR]  (default: {default_weights_dir()})")
        return 2
    folder = make_weights(argv[0] if argv else None)
    print(f"wrote {folder}")
    if argv:
        print(f"point the entry at it: export {PATH_ENV}={folder.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
