#!/bin/bash
# On the GPU machine (its CPU has Python `tokenizers`): loom's tokenizer_bench and HF tokenizers
# (bench/tokenizer_peer.py) on the same corpus bytes, alternated 3 times, single thread. Package
# here first (binary, libpcre2/libutf8proc, the Llama 3.1 and Gemma 3 tokenizer.json files):
#   see docs/benchmarks.md; then run(command="bash bench/tokenizer_peer_on_device.sh",
#   carry=[".dev/tok-bin"]).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.dev/tok-bin
tmp=$(mktemp -d)
tar xJf $bin/tok.tar.xz -C "$tmp"
export LD_LIBRARY_PATH=$PWD/$bin/lib:${LD_LIBRARY_PATH:-}
# tokenizer_bench reads src/tokenizer/testdata/corpus.json under the source dir it was built in.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
lscpu | grep -E "Model name" ; python3 -c "import tokenizers; print('tokenizers', tokenizers.__version__)"
for round in ${ROUNDS:-1 2}; do
  echo "== round $round"
  taskset -c 2 $bin/tokenizer_bench --tokenizers-dir "$tmp/tok" --write-corpus "$tmp/corpus.txt"
  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false taskset -c 2 python3 bench/tokenizer_peer.py "$tmp/tok" "$tmp/corpus.txt"
done
