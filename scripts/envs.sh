# Build the project's virtual environments from its own files. Sourced by scripts/test and scripts/agentrl.
# Each environment is rebuilt only when the files it is built from change (a stamp of their hash).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
TORCH_PIN="torch==2.13.0"

# pip without this machine's "Location ... is ignored" noise.
pip_quiet() {
    local python="$1"; shift
    "$python" -m pip install -q "$@" 2> >(grep -v "^WARNING: Location" >&2)
}

# ensure_env NAME PIP_ARGS... : .venvs/NAME with torch pinned first, then PIP_ARGS installed.
ensure_env() {
    local name="$1"; shift
    local dir="$ROOT/.venvs/$name"
    local stamp
    stamp="$(cd "$ROOT" && cat pyproject.toml envs/*/pyproject.toml models/*/pyproject.toml adapters/*/pyproject.toml scripts/envs.sh \
        2>/dev/null | sha256sum | cut -c1-16) $*"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
        return 0
    fi
    echo "building environment .venvs/$name" >&2
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    pip_quiet "$dir/bin/python" --upgrade pip
    pip_quiet "$dir/bin/python" "$TORCH_PIN"
    (cd "$ROOT" && pip_quiet "$dir/bin/python" "$@")
    echo "$stamp" > "$dir/.stamp"
}

ensure_core_env() {
    ensure_env core -e ".[test,report,lint]" -e envs/bugfix_gym hatchling editables
}

ensure_trl_env() {
    ensure_env trl -e ".[test,report,hf]" -e envs/bugfix_gym -e "models/tinyagent[warmstart]" -e adapters/trl tensorboard \
        hatchling editables
}
