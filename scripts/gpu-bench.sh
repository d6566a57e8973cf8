#!/usr/bin/env bash
# Every GPU figure in one call.
#
#   scripts/gpu-bench.sh --stage DIR
#       Here, on the CPU machine: builds the CUDA release binary
#       (CUDARC_CUDA_VERSION=13000, as CI does) and copies into DIR the
#       binary (stripped, gzipped), this script and its report
#       (scripts/py/gpu_bench_report.py, into DIR/py/), the bench config, the PyTorch peer
#       and a subset of the SMILEsmileD crops (CROPS per class, default 1000;
#       the synthetic generator stands in when the data is absent). DIR must
#       stay under 64 MiB (checked) and be git-ignored (`gpu-bench/` is).
#
#   DIR/gpu-bench.sh
#       On a machine with an NVIDIA GPU (only DIR, nvidia-smi and python3 with
#       torch are needed), in under 10 minutes: a 200-step in-VRAM probe (the
#       cold start), `grin bench step`'s phases, the PyTorch peer, then the same
#       model, data and batch trained once per mode (on-the-fly, precomputed, in-VRAM): steps/s,
#       samples/s, data wait per step, device-busy % from grin's accounting;
#       `grin balance`'s prediction and `grin simulate --from-run`'s for each
#       mode; nvidia-smi dmon during a longer in-VRAM run; an in-VRAM batch
#       sweep; the PyTorch peer (same network, batch and data, eager, data on
#       the GPU), at the run's batch and at each sweep batch; the step's phases
#       at the sweep's largest batch (this binary and BASE's), and Nsight
#       Compute's GPU time per kernel there (when ncu is on the PATH); the three modes again on wgpu (Vulkan), when the machine
#       lists a Vulkan device. Writes DIR/out/gpu-bench.md and gpu-bench.json; the last
#       line printed is
#       `in-vram/on-the-fly <R>x, in-vram busy <B>%, grin/pytorch <P>x, prediction error <E> points`.
#
#   GRIN_BACKEND=cpu DIR/gpu-bench.sh
#       The same steps at a small size on the CPU backend (CI runs this).
#
# Device command (the one call of a GPU session; docs/benchmarks.md, "Training modes and GPU figures"):
#   scripts/gpu-bench.sh --stage gpu-bench     # here
#   run(command="cd gpu-bench && bash gpu-bench.sh", carry=["gpu-bench"])
#
# env: GRIN_BACKEND (cuda|cpu, default cuda), BUDGET_S (default 540: every
#      step is cut off at this total), STEPS (per mode; default: sized from
#      a probe so the three modes take about a minute), SWEEP (in-VRAM batch
#      sizes, default "16 64 256"; cpu "4 8 16"), PYTHON (the peer's python,
#      default python3), BASE and BASE_LABEL (stage only: a baseline binary
#      whose `grin bench step` runs beside this one's, and what to call it),
#      CROPS and CUBECL_CACHE (stage only: the CubeCL
#      kernel and autotune cache to stage, default assets/cubecl-cache.tgz,
#      sm_90a kernels; "none" for no cache; each run sends its own back as
#      cubecl-cache.tgz).
set -euo pipefail

if [ "${1:-}" = "--stage" ]; then
    DIR=${2:?usage: scripts/gpu-bench.sh --stage DIR}
    cd "$(dirname "$0")/.."
    REPO=$(pwd)
    CROPS=${CROPS:-1000}
    DATA=../shared/data/smilesmiled
    echo "gpu-bench: building the CUDA + wgpu release binary" >&2
    # The same command as CI's build, so that in CI this is no rebuild
    # (.cargo/config.toml names the CUDA API version cudarc builds for).
    cargo build --locked --release --workspace --features grin/cuda,grin/wgpu >&2
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd)
    case "$DIR/" in
        "$REPO"/*) git -C "$REPO" check-ignore -q "$DIR/gpu-bench.sh" \
            || { echo "gpu-bench: $DIR is inside the repository but not git-ignored" >&2; exit 1; } ;;
    esac
    rm -rf "${DIR:?}"/*
    mkdir -p "$DIR/configs" "$DIR/peers" "$DIR/py"
    # Stripped and gzipped: the CUDA + wgpu binary alone is about 64 MiB stripped, 16 MiB
    # gzipped; the staged folder must travel in 64 MiB. DIR/gpu-bench.sh unpacks it.
    cp "${CARGO_TARGET_DIR:-target}/release/grin" "$DIR/grin"
    strip "$DIR/grin" 2>/dev/null || true
    gzip -9 "$DIR/grin"
    cp scripts/gpu-bench.sh "$DIR/gpu-bench.sh"
    cp scripts/py/gpu_bench_report.py "$DIR/py/"
    cp configs/gpu-bench.toml "$DIR/configs/"
    cp scripts/peers/torch_detector.py "$DIR/peers/"
    if [ -d "$DATA/smile" ] && [ -d "$DATA/no_smile" ]; then
        for class in smile no_smile; do
            mkdir -p "$DIR/data/smilesmiled/$class"
            mapfile -t files < <(find "$DATA/$class" -maxdepth 1 -type f | sort)
            cp "${files[@]:0:$CROPS}" "$DIR/data/smilesmiled/$class/"
        done
        echo "source crops" >"$DIR/DATA"
    else
        echo "gpu-bench: $DATA is absent: the run uses the synthetic generator (no data files)" >&2
        echo "source synthetic" >"$DIR/DATA"
    fi
    # CubeCL reads cubecl.toml from the working directory up: its kernel (PTX) and autotune
    # caches go to DIR/cubecl-cache, which the run sends back as cubecl-cache.tgz. A cache
    # kept from an earlier run (CUBECL_CACHE, default assets/cubecl-cache.tgz, committed:
    # the H200 runs of 2026-11-27 to 29) travels with the stage, so that a fresh machine skips
    # the compilation it holds (287 s -> 20 s before the first step). Kernels it lacks are
    # compiled as before; copy a run's cubecl-cache.tgz over it to refresh it.
    cat >"$DIR/cubecl.toml" <<'TOML'
[compilation]
cache = { file = "cubecl-cache" }

[compilation.logger]
level = "basic"
file = "out/cubecl-compilation.log"

[autotune]
cache = { file = "cubecl-cache" }

[autotune.logger]
level = "minimal"
file = "out/cubecl-autotune.log"
TOML
    # The staged kernels are PTX for sm_90a (H100, H200): CUBECL_CACHE=none on another GPU.
    CACHE=${CUBECL_CACHE:-assets/cubecl-cache.tgz}
    if [ "$CACHE" = none ]; then
        :
    elif [ -f "$CACHE" ]; then
        cp "$CACHE" "$DIR/cubecl-cache.tgz"
        echo "gpu-bench: staged the CubeCL cache $CACHE" >&2
    elif [ -n "${CUBECL_CACHE:-}" ]; then
        echo "gpu-bench: CUBECL_CACHE=$CUBECL_CACHE is not a file" >&2
        exit 1
    fi
    # The device machine has no Vulkan loader: without one the wgpu step finds no adapter
    # (2026-11-28). Its README's loader packages (`.gl/*.deb`, fetched once, git-ignored)
    # travel with the stage when present, and the run unpacks them (see VULKAN below).
    rm -rf "$DIR/gl"
    if compgen -G "$REPO/.gl/*.deb" >/dev/null; then
        mkdir -p "$DIR/gl" && cp "$REPO"/.gl/*.deb "$DIR/gl/"
        echo "gpu-bench: staged the Vulkan loader packages of .gl/" >&2
    fi
    git -C "$REPO" rev-parse HEAD >"$DIR/COMMIT" 2>/dev/null || true
    # A baseline binary (BASE=path, e.g. a build of the commit before), timed
    # by `grin bench step` in the same call: GPUs of one kind differ by 20%
    # from machine to machine, so a before/after is measured on one.
    if [ -n "${BASE:-}" ]; then
        [ -f "$BASE" ] || { echo "gpu-bench: BASE=$BASE is not a file" >&2; exit 1; }
        cp "$BASE" "$DIR/grin-base"
        strip "$DIR/grin-base" 2>/dev/null || true
        gzip -9 "$DIR/grin-base"
        echo "${BASE_LABEL:-$BASE}" >"$DIR/BASE"
    fi
    size=$(du -sb "$DIR" | cut -f1)
    echo "gpu-bench: staged $DIR: $((size / 1024 / 1024)) MiB ($(du -sh "$DIR/grin.gz" | cut -f1) binary, gzipped)" >&2
    if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
        echo "gpu-bench: $DIR is over 64 MiB; lower CROPS" >&2
        exit 1
    fi
    exit 0
fi

cd "$(dirname "$0")"
# Staged gzipped (see --stage); unpacked once, beside it.
for bin in grin grin-base; do
    if [ ! -x ./$bin ] && [ -f ./$bin.gz ]; then
        gzip -dc $bin.gz >$bin.part && chmod +x $bin.part && mv $bin.part $bin
    fi
done
[ -x ./grin ] || { echo "gpu-bench: no ./grin here: stage first (scripts/gpu-bench.sh --stage DIR), then run DIR/gpu-bench.sh" >&2; exit 2; }
BACKEND=${GRIN_BACKEND:-cuda}
# Only on the GPU: the cache's wgpu autotune choices are keyed by adapter kind, not name, so
# the H200's would be taken for lavapipe's (CI's CPU run), whose wgpu run then fails.
if [ "$BACKEND" = cuda ] && [ -f cubecl-cache.tgz ] && [ ! -d cubecl-cache ]; then
    tar xzf cubecl-cache.tgz
fi
BUDGET_S=${BUDGET_S:-540}
START=$(date +%s)
# The device machine names a folder in $OUT whose files come back (see the end).
OUT_DIR=${OUT:-}
OUT=out
rm -rf "$OUT"
mkdir -p "$OUT"
LOG=$OUT/log.txt
: >"$LOG"

SETS=(--set "name=gpu-bench")
if grep -q crops DATA 2>/dev/null; then
    SETS+=(--set "features.source.root=data/smilesmiled")
else
    SETS+=(--set 'features.source={kind="synthetic"}')
fi
case "$BACKEND" in
    cuda)
        SWEEP=${SWEEP:-16 64 256}
        SAMPLES=4096
        PEER_DEVICE=cuda
        ;;
    cpu)
        # Small enough for CI's two cores: 64x48 frames, batch 8.
        SETS+=(--set features.width=64 --set features.height=48 --set train.batch_size=8)
        SWEEP=${SWEEP:-4 8 16}
        SAMPLES=256
        PEER_DEVICE=cpu
        STEPS=${STEPS:-24}
        ;;
    *) echo "gpu-bench: GRIN_BACKEND must be cuda or cpu" >&2; exit 2 ;;
esac
CONFIG=(--config configs/gpu-bench.toml "${SETS[@]}")
BATCH=$(./grin config "${CONFIG[@]}" --get train.batch_size 2>/dev/null || echo 16)

remaining() { echo $((BUDGET_S - ($(date +%s) - START))); }
# step NAME CMD...: runs CMD under what is left of the budget; a failure is
# recorded (with its error) and the bench goes on.
step() {
    local name=$1
    shift
    local left
    left=$(remaining)
    if [ "$left" -le 5 ]; then
        echo "gpu-bench: $name: skipped, the ${BUDGET_S} s budget is spent" | tee -a "$LOG" >&2
        echo "{\"step\":\"$name\",\"status\":\"skipped: budget spent\"}" >>"$OUT/steps.jsonl"
        return 1
    fi
    echo "gpu-bench: $name ($left s left)" >&2
    local t0=$SECONDS rc=0
    timeout "$left" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "{\"step\":\"$name\",\"status\":\"ok\",\"seconds\":$((SECONDS - t0))}" >>"$OUT/steps.jsonl"
        return 0
    fi
    local why
    why=$(tail -n 3 "$OUT/$name.err" | tr '\n"\\' '   ')
    echo "gpu-bench: $name failed (exit $rc): $why" | tee -a "$LOG" >&2
    echo "{\"step\":\"$name\",\"status\":\"failed (exit $rc)\",\"error\":\"$why\"}" >>"$OUT/steps.jsonl"
    return 1
}

if [ "$BACKEND" = cuda ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1 || true
fi
BENCH=(./grin bench modes "${CONFIG[@]}" --backend "$BACKEND" --samples "$SAMPLES" --runs-dir "$OUT/runs")

# An in-VRAM probe sizes the runs: steps/s on this device decide how many
# steps fit in about 20 s per mode, and in no more than a quarter of what the
# budget has left. Its 200 steps also make it the first headline figure, as
# the probe is also the cold start: on a fresh machine the first process
# compiles (NVRTC) and autotunes every kernel (287 s on an H200, 2026-11-27)
# unless the staged CubeCL cache holds them (20 s, the run included); later
# processes find them in cubecl-cache and start in about 10 s, which each run
# below pays once.
START_S=10
if [ -z "${STEPS:-}" ]; then
    STEPS=200
    if step probe "${BENCH[@]}" --modes in-vram --steps 200 --json "$OUT/probe.json"; then
        STEPS=$(python3 -c "import json; r=json.load(open('$OUT/probe.json'))['rows'][0]; fit=($(remaining) / 4 - $START_S) * r['steps_per_s'] / 3; print(max(40, min(3000, int(20 * r['steps_per_s']), int(fit))))")
    fi
fi

# Where the step's time goes, phase by phase (each phase synced before its
# clock is read), on batches cut from the same store in device memory: the
# probe's, or (STEPS given, no probe) one of the same SAMPLES written here.
step step-phases ./grin bench step "${CONFIG[@]}" --backend "$BACKEND" --store "$OUT/runs/data" \
    --samples "$SAMPLES" --warmup 10 --steps 50 --repeats 3 --json "$OUT/step-phases.json" || true
# The same with Burn's optimizer adaptor (parameter by parameter) in place
# of grin's flat AdamW: what the flat one saves, on the same card.
step step-phases-burn ./grin bench step "${CONFIG[@]}" --backend "$BACKEND" --store "$OUT/runs/data" \
    --samples "$SAMPLES" --warmup 10 --steps 50 --repeats 3 --optimizer burn --json "$OUT/step-phases-burn.json" || true
# Kernel launches per step, by kernel name (CubeCL's launch log, counted
# after warm-up): the step on a device is host-bound when it is many small
# kernels. Counted on CUDA; on the CPU backend, on wgpu (lavapipe in CI),
# whose step launches the same kernels.
COUNT_ON=$BACKEND
[ "$BACKEND" = cuda ] || COUNT_ON=wgpu
step launches ./grin bench step "${CONFIG[@]}" --backend "$COUNT_ON" --store "$OUT/runs/data" \
    --samples "$SAMPLES" --warmup 2 --steps 2 --repeats 1 --launches --json "$OUT/launches.json" || true
if [ -x ./grin-base ]; then
    step step-phases-base ./grin-base bench step "${CONFIG[@]}" --backend "$BACKEND" --store "$OUT/runs/data" \
        --samples "$SAMPLES" --warmup 10 --steps 50 --repeats 3 --json "$OUT/step-phases-base.json" || true
fi

# The peer next: the headline ratio needs it more than the runs after it. It
# reads the same store.
PEER_STEPS=$((STEPS < 50 ? STEPS : 100))
PYTHON=${PYTHON:-python3}
HAS_TORCH=$("$PYTHON" -c 'import torch' 2>/dev/null && echo 1 || true)
if [ -n "$HAS_TORCH" ]; then
    step torch "$PYTHON" peers/torch_detector.py --store "$OUT/runs/data" --batch "$BATCH" --device "$PEER_DEVICE" \
        --steps "$PEER_STEPS" --warmup 10 --repeats 3 || true
else
    echo "gpu-bench: torch: skipped: $PYTHON has no torch module here (the GPU machine's image has it; PYTHON=... names another)" | tee -a "$LOG" >&2
    echo '{"step":"torch","status":"skipped: no torch module"}' >>"$OUT/steps.jsonl"
fi

step modes "${BENCH[@]}" --steps "$STEPS" --json "$OUT/modes.json" || true

# In-VRAM again, longer, with nvidia-smi dmon sampling the GPU once a second.
LONG=$((STEPS * 2))
if [ "$BACKEND" = cuda ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi dmon -s u -d 1 >"$OUT/dmon.txt" 2>&1 &
    DMON=$!
    step in-vram-dmon "${BENCH[@]}" --modes in-vram --steps "$LONG" --json "$OUT/in-vram-dmon.json" || true
    kill "$DMON" 2>/dev/null || true
else
    echo "# no nvidia-smi on the $BACKEND backend" >"$OUT/dmon.txt"
    step in-vram-dmon "${BENCH[@]}" --modes in-vram --steps "$LONG" --json "$OUT/in-vram-dmon.json" || true
fi

# Each sweep batch against the peer at the same batch: where the step stops
# being bound by the host's per-op cost, the ratio shows how the kernels
# themselves compare.
for b in $SWEEP; do
    step "sweep-$b" "${BENCH[@]}" --modes in-vram --steps "$STEPS" --set "train.batch_size=$b" \
        --json "$OUT/sweep-$b.json" || true
    if [ -n "$HAS_TORCH" ] && [ "$b" != "$BATCH" ]; then
        step "torch-$b" "$PYTHON" peers/torch_detector.py --store "$OUT/runs/data" --batch "$b" \
            --device "$PEER_DEVICE" --steps $((PEER_STEPS / 2)) --warmup 10 --repeats 3 || true
    fi
done

# The phases at the sweep's largest batch too, where the step stops being bound by the host
# and the kernels show (the stem's weight gradient took 40 ms of a 64 ms step's GPU time at
# batch 256, 2026-11-29): this binary's, then the baseline's.
LARGE=$(echo $SWEEP | tr ' ' '\n' | sort -n | tail -n 1)
for bin in grin grin-base; do
    [ -x ./$bin ] || continue
    step "step-phases-$bin-$LARGE" ./$bin bench step "${CONFIG[@]}" --backend "$BACKEND" --store "$OUT/runs/data" \
        --samples "$SAMPLES" --set "train.batch_size=$LARGE" --warmup 5 --steps 20 --repeats 3 \
        --json "$OUT/step-phases-$bin-large.json" || true
done
# Where the GPU's time goes at that batch, kernel by kernel: Nsight Compute's duration of
# each launch (about two steps' worth; the report sums them by kernel name). It found the
# stem's weight gradient above; `ncu` is on the H200 machines' PATH.
if [ "$BACKEND" = cuda ] && command -v ncu >/dev/null; then
    step ncu ncu --clock-control none --launch-count 2400 --metrics gpu__time_duration.sum --csv --page raw \
        ./grin bench step "${CONFIG[@]}" --backend cuda --store "$OUT/runs/data" --samples "$SAMPLES" \
        --set "train.batch_size=$LARGE" --warmup 1 --steps 2 --repeats 1 || true
fi

# The CLI's own views of the same runs, for the record.
step balance ./grin balance "${CONFIG[@]}" --backend "$BACKEND" --set "train.store=$OUT/runs/data" || true
# In VRAM there is no loader queue to simulate (the summary's figures give
# the serial form, step / (step + cut), which modes.json carries).
for mode in on-the-fly precomputed; do
    [ -f "$OUT/runs/$mode/summary.json" ] || continue
    step "simulate-$mode" ./grin simulate --from-run "$OUT/runs/$mode" --out "$OUT/simulate-$mode.svg" || true
done

# wgpu: the same modes, model, data and batch through wgpu (burn-cubecl's kernels compiled to
# WGSL, on Vulkan): on a GPU machine its Vulkan driver, on the CPU backend Mesa's lavapipe.
if ./grin train --help 2>/dev/null | grep -q wgpu; then
    # VULKAN: on the GPU machine, the staged loader (see --stage) and NVIDIA's driver file.
    if [ "$BACKEND" = cuda ]; then
        if [ -d gl ] && ! ldconfig -p 2>/dev/null | grep -q libvulkan; then
            for deb in gl/*.deb; do dpkg -x "$deb" / || true; done
            ldconfig || true
        fi
        icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then
            export VK_DRIVER_FILES=$icd
        fi
    fi
    vulkaninfo --summary >"$OUT/vulkan.txt" 2>&1 || echo "no vulkaninfo" >"$OUT/vulkan.txt"
    step wgpu-modes ./grin bench modes "${CONFIG[@]}" --backend wgpu --samples "$SAMPLES" --runs-dir "$OUT/runs-wgpu" \
        --steps "$STEPS" --json "$OUT/wgpu-modes.json" || true
else
    echo '{"step":"wgpu-modes","status":"skipped: grin built without wgpu"}' >>"$OUT/steps.jsonl"
fi

# The report: gpu-bench.md and gpu-bench.json in $OUT (staged beside this script, see --stage).
python3 py/gpu_bench_report.py "$OUT" "$BACKEND" "$BATCH"

# On the device machine, only what is under $OUT comes back, and only a few
# files: the tables, and everything small in one archive.
if [ -n "${OUT_DIR:-}" ]; then
    cp "$OUT/gpu-bench.md" "$OUT/gpu-bench.json" "$OUT_DIR/" 2>/dev/null || true
    # The CubeCL caches, for the next stage (CUBECL_CACHE): a fresh machine then skips the
    # kernels they hold.
    if [ -d cubecl-cache ]; then
        tar czf "$OUT_DIR/cubecl-cache.tgz" cubecl-cache || echo "gpu-bench: the CubeCL cache did not pack" >&2
    fi
    (cd "$OUT" && find . -type f -size -2M \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.txt' \
        -o -name '*.out' -o -name '*.err' -o -name '*.csv' -o -name '*.svg' -o -name '*.log' \) -print0 | tar czf "$OUT_DIR/gpu-bench.tgz" --null -T -)
fi
