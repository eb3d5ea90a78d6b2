#!/usr/bin/env bash
# Installs everything llmserve needs to build, test and fetch models, on Debian 12, as root.
# Idempotent and quiet: when every package is already present it changes nothing and asks no
# mirror. Safe to run on every build.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  clang libclang-rt-14-dev            # ASan/UBSan builds and libFuzzer targets
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev libpcre2-dev libboost-dev
  libopenblas-dev                     # GPTQ's Cholesky and matrix products (llmserve quantize)
  python3 python3-pip python3-venv
  python3-jsonschema                  # the structured-output tests validate with it (not ours)
  chromium fonts-dejavu-core          # the web UI tests drive the pages in headless Chromium
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python: only pip itself is needed at run time (to fetch model packages). The golden-data
# generators in tools/ have their own requirements (tools/requirements.txt), installed on demand.
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "install-deps: python3 has no pip" >&2
  exit 1
fi

# The server tests (ctest label `server`) drive `llmserve serve` with the official OpenAI client.
# Debian 12's pip refuses system-wide installs without --break-system-packages.
if ! python3 -c "import openai" >/dev/null 2>&1; then
  echo "install-deps: installing the openai Python client" >&2
  python3 -m pip install -q --break-system-packages --root-user-action=ignore openai >/dev/null
fi
