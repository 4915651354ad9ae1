#!/usr/bin/env bash
# The device checks of issues 43 and 45 in one run (about 9 minutes) on a lent GPU machine (torch, timm, torchvision there; no
# PyAV, FAISS or lmdb, no network): install the carried wheels, then the NVDEC tests, the cache-on-CUDA test
# and benchmarks/gpu.py (extraction incl. PyAV NVDEC, decode-once passes, NVDEC parity, training step, k-NN).
#
# Here, once (the wheels travel with the working tree under .whl/, which git ignores via .git/info/exclude):
#   echo /.whl/ >> .git/info/exclude
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl av==18.1.0 lmdb faiss-cpu
# Then, with the device tool: command "bash benchmarks/gpu_session.sh", carry [".whl"], timeout 580 s.
# Figures land in $OUT (gpu.json, *.log); record them with the GPU's name in BENCHMARKS.md.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import av, av.codec.hwaccel as h, torch, timm; print(av.__version__, h.hwdevices_available(), torch.__version__, timm.__version__, torch.cuda.get_device_name())" \
    | tee "$OUT/versions.log"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/versions.log"
# Issue 45 first (the training step before/after + profile, k-NN against its GEMM), then issue 43's checks.
timeout 300 python3 benchmarks/gpu.py --parts train,knn --train-steps 20 --repeats 3 \
    --profile "$OUT/profile.txt" --out "$OUT/gpu45.json" 2>&1 | tee "$OUT/gpu45.log"
timeout 90 python3 -m pytest -q -p no:cacheprovider -rs tests/eval/data/test_pyav_cuda.py \
    tests/eval/extract/test_cache_extract.py tests/eval/evaluate/test_knn.py 2>&1 | tail -40 | tee "$OUT/pytest.log"
timeout 150 python3 benchmarks/gpu.py --parts nvdec,passes --videos 3 --seconds 20 --repeats 2 \
    --pass-models 3 --out "$OUT/gpu43.json" 2>&1 | tee "$OUT/gpu43.log"
