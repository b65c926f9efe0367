#!/bin/sh
# The TypeScript client's suite (registered in tests/e2e/meson.build):
# copies clients/typescript into the build directory, installs its
# devDependencies there from the committed package-lock.json (never into
# the source tree), takes the example out of the docs, compiles it all with
# tsc (strict) and runs the tests with node's built-in runner.
#
# usage: run.sh AIRLOCK SOURCE-DIR WORK-DIR DOC.md
set -eu
airlock=$1 src=$2 work=$3 doc=$4
tsc=${TSC:-tsc}

for tool in "$tsc" node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "FAILED: $tool is not installed (scripts/lib.sh's packages: node-typescript, nodejs)" >&2
    exit 1
  fi
done

mkdir -p "$work"
rm -rf "$work/src" "$work/test" "$work/dist"
cp -R "$src/src" "$src/test" "$src/package.json" "$src/package-lock.json" \
  "$src/tsconfig.json" "$src/tsconfig.test.json" "$work/"

# npm ci only when the lock file changed since the last install.
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.airlock-installed-lock"; then
  if ! (cd "$work" && npm ci --no-audit --no-fund --ignore-scripts >npm.log 2>&1); then
    cat "$work/npm.log" >&2
    echo "FAILED: npm ci could not install the TypeScript client's devDependencies" \
      "(@types/node, from $src/package-lock.json) into $work" >&2
    exit 1
  fi
  cp "$work/package-lock.json" "$work/node_modules/.airlock-installed-lock"
fi
# The example imports the package by its name: it resolves to this copy.
ln -sfn .. "$work/node_modules/airlock-sdk"

# The docs' example: the ```ts block after the line <!-- example: ts-seed -->.
awk '/<!-- example: ts-seed -->/ { armed = 1; next }
     armed && /^```ts$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$doc" >"$work/test/example.ts"
if ! [ -s "$work/test/example.ts" ]; then
  echo "FAILED: no \`\`\`ts block after <!-- example: ts-seed --> in $doc" >&2
  exit 1
fi

"$tsc" -p "$work/tsconfig.test.json"
AIRLOCK_BIN=$airlock AIRLOCK_TS_EXAMPLE=$work/dist/test/example.js \
  exec node --test --test-reporter=tap "$work/dist/test/client.test.js"
