#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the llama-cpp-python 0.3.36 sdist on PyPI (it vendors llama.cpp at
# commit 0c1e570, with tools/server and gguf-py) into a cache outside the checkout, reused when present.
# The sdist is pinned by its sha256; nothing is built when the binary is already there.
#   SPECACCEPT_ENGINES_CACHE  the cache (default ~/.cache/specaccept/engines)
#   JOBS                      parallel compile jobs (default 2)
set -euo pipefail
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
URL=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$VERSION.tar.gz
CACHE=${SPECACCEPT_ENGINES_CACHE:-$HOME/.cache/specaccept/engines}
DEST=$CACHE/llama.cpp-$VERSION
JOBS=${JOBS:-2}
if [ -x "$DEST/bin/llama-server" ] && [ -d "$DEST/gguf-py/gguf" ]; then
    echo "llama-server: $DEST/bin/llama-server (cached)"
    exit 0
fi
mkdir -p "$CACHE"
WORK=$(mktemp -d "$CACHE/.build-llama.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
TARBALL=$CACHE/llama_cpp_python-$VERSION.tar.gz
if ! echo "$SHA256  $TARBALL" | sha256sum -c --quiet - 2>/dev/null; then
    python3 - "$URL" "$TARBALL.part" <<'PY'
import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=120) as response, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(response, out)
PY
    echo "$SHA256  $TARBALL.part" | sha256sum -c --quiet -
    mv "$TARBALL.part" "$TARBALL"
fi
tar xzf "$TARBALL" -C "$WORK" "llama_cpp_python-$VERSION/vendor/llama.cpp"
SRC=$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
cmake -S "$SRC" -B "$WORK/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$WORK/cmake.log" 2>&1 \
    || { tail -40 "$WORK/cmake.log"; exit 1; }
cmake --build "$WORK/build" --target llama-server -j "$JOBS"
STAGE=$WORK/stage
mkdir -p "$STAGE/bin"
cp "$WORK/build/bin/llama-server" "$STAGE/bin/"
cp -r "$SRC/gguf-py" "$STAGE/gguf-py"
mkdir -p "$STAGE/src/common" "$STAGE/src/tools/server"
cp "$SRC/common/speculative.cpp" "$STAGE/src/common/"
cp "$SRC/tools/server/server-context.cpp" "$STAGE/src/tools/server/"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
echo "llama-server: $DEST/bin/llama-server"
