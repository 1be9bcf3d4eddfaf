#!/usr/bin/env bash
# Usage: generate_stale_test.sh PYTHON REPO
# The generator's check must fail when monitoring/ changes and its output is not made again: on
# a copy of deploy/kubernetes and monitoring/ with one rule's expression changed, `generate
# --check` exits 1 naming rules.generated.yaml; after `generate`, it passes.
set -euo pipefail
python=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/deploy"
cp -r "$repo/monitoring" "$work/"
cp -r "$repo/deploy/kubernetes" "$work/deploy/"
rm -rf "$work/deploy/kubernetes/test/node_modules"
"$python" "$work/deploy/kubernetes/generate" --check --root "$work"
rules=$(ls "$work"/monitoring/rules/*.rules.yaml | head -1)
sed -i '0,/expr:/s/expr: /expr: 2 * /' "$rules"
if out=$("$python" "$work/deploy/kubernetes/generate" --check --root "$work" 2>&1); then
    echo "generate --check passed after $(basename "$rules") changed" >&2
    exit 1
fi
grep -q "rules.generated.yaml is out of date" <<<"$out" || { echo "$out" >&2; exit 1; }
echo "generate --check: $(head -1 <<<"$out")"
"$python" "$work/deploy/kubernetes/generate" --root "$work" >/dev/null
"$python" "$work/deploy/kubernetes/generate" --check --root "$work"
echo "after generate: up to date"
