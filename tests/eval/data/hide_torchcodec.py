"""A pytest plugin that makes `import torchcodec` fail, as on an install without the optional `torchcodec`
extra (`pip install -e ".[test]"`): `python -m pytest -p tests.eval.data.hide_torchcodec tests/...` checks
that every TorchCodec test skips with its reason there instead of failing."""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec


class _HideTorchcodec:
    """A meta-path finder that refuses `torchcodec` and its submodules."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name == "torchcodec" or name.startswith("torchcodec."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by {__name__})", name=name)
        return None


sys.meta_path.insert(0, _HideTorchcodec())
for _name in [name for name in sys.modules if name == "torchcodec" or name.startswith("torchcodec.")]:
    del sys.modules[_name]
