#!/usr/bin/env bash
# Build .venvs/verl: torch pinned first (a local CPU build), then this repo's packages with the verl adapter,
# which brings verl 0.9.1 and what its main_ppo imports at run time.
# Idempotent: skipped when the stamp (hash of the files it is built from) is unchanged.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/envs.sh"

DIR="$ROOT/.venvs/verl"
STAMP="$(cd "$ROOT" && cat pyproject.toml envs/bugfix_gym/pyproject.toml models/tinyagent/pyproject.toml adapters/verl/pyproject.toml \
    scripts/envs.sh scripts/build_verl_env.sh | sha256sum | cut -c1-16)"

if [ -f "$DIR/.stamp" ] && [ "$(cat "$DIR/.stamp")" = "$STAMP" ]; then
    exit 0
fi
echo "building environment .venvs/verl" >&2
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR"
pip_quiet "$DIR/bin/python" --upgrade pip
pip_quiet "$DIR/bin/python" "$TORCH_PIN"
# agentrl-verl declares what verl's main_ppo needs here (TransferQueue, Ray, ...) beside verl itself.
(cd "$ROOT" && pip_quiet "$DIR/bin/python" "$TORCH_PIN" -e ".[hf]" -e envs/bugfix_gym -e models/tinyagent -e adapters/verl \
    pytest pytest-asyncio)
echo "$STAMP" > "$DIR/.stamp"
