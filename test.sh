#!/usr/bin/env bash
# Install what is missing, build the release and the sanitizer (ASan+UBSan) builds and the fuzz
# targets, then run every test: unit, fuzz (bounded time), end-to-end as root and as an
# unprivileged user. The last line says "N passed, N failed, N skipped".
set -eu
cd "$(dirname "$0")"
scripts/deps.sh test
make -j"$(nproc)" all san
make -j"$(nproc)" fuzz
exec tests/run.sh "$@"
