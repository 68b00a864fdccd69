#!/usr/bin/env bash
# Build .venvs/openrlhf: torch pinned first (a local CPU build), then OpenRLHF 0.11.2 without its
# flash-attn and vLLM (neither builds without CUDA), its needed dependencies by hand, DeepSpeed with
# no prebuilt ops, and this repo's own packages. Idempotent: skipped when the stamp is unchanged.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/envs.sh"

DIR="$ROOT/.venvs/openrlhf"
STAMP="$(cd "$ROOT" && cat pyproject.toml envs/bugfix_gym/pyproject.toml models/tinyagent/pyproject.toml adapters/openrlhf/pyproject.toml \
    scripts/envs.sh scripts/build_openrlhf_env.sh | sha256sum | cut -c1-16)"

# pip's resolver lists the OpenRLHF requirements left out on purpose (flash-attn and its GPU or logging
# extras) after every install; hide those lines along with pip's "Location" noise.
pip_openrlhf() {
    pip_quiet "$@" 2> >(grep -v -e "^openrlhf 0.11.2 requires " -e "^ERROR: pip's dependency resolver" >&2)
}

if [ -f "$DIR/.stamp" ] && [ "$(cat "$DIR/.stamp")" = "$STAMP" ]; then
    exit 0
fi
echo "building environment .venvs/openrlhf" >&2
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR"
PY="$DIR/bin/python"
pip_openrlhf "$PY" --upgrade pip setuptools wheel
pip_openrlhf "$PY" "$TORCH_PIN"
pip_openrlhf "$PY" --no-deps "openrlhf==0.11.2"
# OpenRLHF's requirements minus flash-attn, vLLM and what only its GPU or logging paths import.
pip_openrlhf "$PY" "$TORCH_PIN" "transformers==5.15.0" "ray[default]==2.55.0" accelerate aiohttp datasets einops \
    peft pillow pylatexenc sympy torchdata tqdm
DS_BUILD_OPS=0 pip_openrlhf "$PY" --no-build-isolation "$TORCH_PIN" "deepspeed==0.19.6"
# tensorboard: the logger the tests read back (--report-to tensorboard); users bring their own.
(cd "$ROOT" && pip_openrlhf "$PY" "$TORCH_PIN" -e ".[hf]" -e envs/bugfix_gym -e models/tinyagent -e adapters/openrlhf pytest pytest-asyncio \
    tensorboard)
echo "$STAMP" > "$DIR/.stamp"
