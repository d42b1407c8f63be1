#!/usr/bin/env bash
# scripts/check-deps (docs/design.md, the dependency rule): the tree follows
# the rule, and a copy of the tree with a planted include against it, a
# folder without a line, or a cycle in the rule fails with the line that
# names it. Usage: tests/scripts/check_deps_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
check="$src/scripts/check-deps"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # expect <want exit> <want line> <root>
  local out rc=0
  out="$("$check" --root "$3" 2>&1)" || rc=$?
  if [ "$rc" -ne "$1" ] || ! grep -qxF -- "$2" <<<"$out"; then
    echo "FAIL: exit $rc (want $1); want the line: $2"
    echo "got: $out"
    failures=$((failures + 1))
  fi
}
fresh_copy() {
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree/docs"
  cp "$src/docs/design.md" "$tmp/tree/docs/"
  for d in search_spaces results costmodel engine profiler tuner; do
    cp -r "$src/$d" "$tmp/tree/$d"
  done
}

# The tree as it is: nothing to say.
out="$("$check" --root "$src")" || { echo "FAIL: the tree breaks the rule:"; \
  echo "$out"; exit 1; }
[ -z "$out" ] || { echo "FAIL: output on a clean tree: $out"; exit 1; }

# The cost model including the tuner.
fresh_copy
line="$(($(wc -l < "$tmp/tree/costmodel/cost_model.cc") + 1))"
echo '#include "tuner/inputs/inputs.h"' >> "$tmp/tree/costmodel/cost_model.cc"
expect 1 "costmodel/cost_model.cc:$line: includes tuner/inputs/inputs.h, but costmodel may include only search_spaces (docs/design.md, the dependency rule)" "$tmp/tree"

# A folder with sources and no line.
fresh_copy
mkdir "$tmp/tree/costmodel/extra"
echo '#include "search_spaces/status.h"' > "$tmp/tree/costmodel/extra/x.h"
expect 1 "costmodel/extra/x.h: folder costmodel/extra has no line in docs/design.md's deps block; add one" "$tmp/tree"

# A rule whose folders depend on each other.
fresh_copy
sed -i 's/^search_spaces  *<-$/search_spaces <- costmodel/' "$tmp/tree/docs/design.md"
expect 1 "cycle in the rule: costmodel -> search_spaces -> costmodel" "$tmp/tree"

# No rule to read.
fresh_copy
sed -i 's/^```deps$/```/' "$tmp/tree/docs/design.md"
expect 2 "check-deps: $tmp/tree/docs/design.md has no \`\`\`deps block" "$tmp/tree"

[ "$failures" -eq 0 ] || exit 1
echo "check-deps: 5 cases pass"
