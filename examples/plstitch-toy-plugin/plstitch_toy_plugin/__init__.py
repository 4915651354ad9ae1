"""plstitch-toy-plugin: a toy of each kind of plstitch extension, found through entry points.

- `protocol.py`: `toy-centroid`, nearest class mean (`plstitch cv --protocol toy-centroid`, benchmark cells);
- `objective.py`: `toy-margin`, a margin ranking L_vid on consecutive frames (`plstitch train --objective`);
- `encoder.py`: `toy-vit`, a tiny ViT whose weights `python -m plstitch_toy_plugin.encoder` makes;
- `dataset.py`: `toy-colours`, a few short videos of plain colours, generated on first use;
- `task.py`: `toy-progress`, the fraction of the video elapsed (`plstitch linear --task toy-progress`).

Nothing here is imported when the package is imported: plstitch imports each module when its registry is
first used.
"""

__version__ = "0.1.0"
