#!/usr/bin/env bash
# Install what the integration tests run beside the Python environment, when it is missing:
# Debian's PostgreSQL server (the MLflow tracking server's store) and Chromium with its
# driver (the MLflow UI test). Nothing downloads a browser at test time; this is the one
# place system packages come from. Needs root or sudo on a Debian/Ubuntu machine.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" > /dev/null || command -v initdb > /dev/null || missing+=(postgresql)
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
[[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then sudo=(); elif command -v sudo > /dev/null; then sudo=(sudo); else
  echo "The integration tests need: ${missing[*]}. Install them as root:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get > /dev/null; then
  echo "The integration tests need PostgreSQL's server and Chromium (${missing[*]}); install them with your" \
       "package manager (this script knows apt-get only)." >&2
  exit 1
fi
echo "Installing ${missing[*]} with apt-get (the integration tests need them)"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
