#!/usr/bin/env bash
# Build .venvs/trl: torch pinned first (a local CPU build), then TRL, then this repo's own packages.
# Idempotent: skipped when the stamp (hash of the files it is built from) is unchanged.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
DIR="$ROOT/.venvs/trl"
STAMP="$(cd "$ROOT" && cat pyproject.toml envs/bugfix_gym/pyproject.toml scripts/build_trl_env.sh | sha256sum | cut -c1-16)"

if [ -f "$DIR/.stamp" ] && [ "$(cat "$DIR/.stamp")" = "$STAMP" ]; then
    exit 0
fi
echo "building environment .venvs/trl" >&2
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR"
"$DIR/bin/python" -m pip install -q --upgrade pip
"$DIR/bin/python" -m pip install -q "torch==2.13.0"
"$DIR/bin/python" -m pip install -q "torch==2.13.0" "trl==1.16.0" peft tokenizers
(cd "$ROOT" && "$DIR/bin/python" -m pip install -q "torch==2.13.0" -e . -e envs/bugfix_gym pytest pytest-asyncio)
echo "$STAMP" > "$DIR/.stamp"
