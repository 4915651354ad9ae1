#!/usr/bin/env bash
# The device checks of issues 43 and 45 in one run on a lent GPU machine (torch, timm, torchvision there; no
# PyAV, FAISS or lmdb, no network): install the carried wheels, then the NVDEC tests, the cache-on-CUDA test
# and benchmarks/gpu.py (extraction incl. PyAV NVDEC, decode-once passes, NVDEC parity, training step, k-NN).
#
# Here, once (the wheels travel with the working tree under .whl/, which git ignores via .git/info/exclude):
#   echo /.whl/ >> .git/info/exclude
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl av==18.1.0 lmdb faiss-cpu
# Then, with the device tool: command "bash benchmarks/gpu_session.sh", carry [".whl"], timeout ~550 s.
# Figures land in $OUT (gpu.json, *.log); record them with the GPU's name in BENCHMARKS.md.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import av, av.codec.hwaccel as h, torch; print(av.__version__, h.hwdevices_available(), torch.cuda.get_device_name())" \
    | tee "$OUT/versions.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs tests/eval/data/test_pyav_cuda.py \
    tests/eval/extract/test_cache_extract.py 2>&1 | tail -40 | tee "$OUT/pytest.log"
timeout 330 python3 benchmarks/gpu.py --parts extract,passes,nvdec,knn,train --videos 4 --seconds 30 \
    --repeats 2 --pass-models 3 --out "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu.log"
