# Sourced on the GPU machine by the tools/cuda/run_*_on_device.sh scripts, from the repository
# root, with $bin set to the package folder (see package_e2e.sh): unpacks its xz'd binaries and
# shared libraries, puts them and the machine's CUDA libraries on LD_LIBRARY_PATH, and links the
# source directory the binaries were built in ($LOOM_BUILT_IN, default /work/main: the tests read
# models/default under it) to this checkout.
[ -f "$bin/bins.tar.xz" ] && [ ! -f "$bin/loom" ] && tar xJf "$bin/bins.tar.xz" -C "$bin"
libs=/tmp/$(basename "$bin")-lib
[ -d "$bin/lib" ] || [ -d "$libs/lib" ] || { mkdir -p "$libs" && tar xJf "$bin/lib.tar.xz" -C "$libs"; }
cublas=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null ||
         find / -name 'libcublasLt.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/$bin/lib:$libs/lib:$(dirname "${cublas:-/usr/local/cuda/lib64/x}"):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
built_in=${LOOM_BUILT_IN:-/work/main}
[ -e "$built_in" ] || { mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; }
# The default model's 200 greedy ids from the same prompt on CUDA and on the CPU, compared:
# prints "generate default 200 greedy ids, cuda<$1> vs cpu: identical|DIFFERENT", then with $2
# the first $2 bytes of the CUDA ids.
# Needs $bin and $out.
check_greedy_ids() {
  local label=${1:-} ids=0,15,251,78,9,1203,44,310,72,5 dev r
  for dev in cuda cpu; do
    timeout 60 $bin/loom generate models/default --device $dev --ids $ids -n 200 --temp 0 \
      --ignore-eos > "$out/gen_$dev.txt" 2> "$out/gen_$dev.err"
  done
  cmp -s "$out/gen_cuda.txt" "$out/gen_cpu.txt" && r=identical || r=DIFFERENT
  echo "generate default 200 greedy ids, cuda$label vs cpu: $r${2:+; $(head -c "$2" "$out/gen_cuda.txt")}"
}

# Configures and builds llama.cpp's CUDA (sm_90a) targets from the source unpacked in $1 (see
# tools/cuda/pack_llamacpp.sh) into $1/build, logs in $2, at most $3 seconds of ninja; prints
# "llama.cpp build: exit N after S s". The remaining arguments are the ninja targets.
build_llamacpp() {
  local work=$1 logs=$2 limit=$3 t0 rc
  shift 3
  t0=$(date +%s)
  cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    > "$logs/llamacpp_cmake.log" 2>&1
  timeout "$limit" ninja -C "$work/build" "$@" > "$logs/llamacpp_build.log" 2>&1
  rc=$?
  echo "llama.cpp build: exit $rc after $(($(date +%s) - t0)) s"
}
