#!/usr/bin/env bash
# Where a CG iteration's time goes on the GPU machine: per-iteration wall time of long fixed
# solves (host-bound at small sizes, device-bound at large ones) and, with Nsight Compute, each
# kernel's duration, DRAM bytes, registers and occupancy. Output in $OUT/la-profile.log.
#
#   bench/la-profile.sh            # needs build-gpu (bench/la-gpu.sh build)
#   WALL_PROBLEMS="2d5 447 400" PROFILE_PROBLEMS="" bench/la-profile.sh   # "stencil n its;..."
set -uo pipefail
if [[ -n ${OUT:-} ]]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log=$OUT/la-profile.log
cli=build-gpu/tools/sluice/sluice

{
  echo "== per-iteration wall time (fixed iterations, min of 3)"
  IFS=';' read -ra wall <<<"${WALL_PROBLEMS-2d5 16 2000;2d5 447 400;2d5 1414 200;2d5 4472 40;3d7 52 400;3d7 113 200;3d7 243 40}"
  for p in "${wall[@]}"; do
    read -r st n its <<<"$p"
    # async: a block of iterations per cooperative kernel; async-steps: two kernels per
    # iteration (SLUICE_CUDA_CG_BLOCKS=0); async-nopdl: those without programmatic dependent
    # launch (SLUICE_CUDA_PDL=0).
    for mode in async async-steps async-nopdl sync; do
      pdl=1 blocks=1
      [[ $mode == async-nopdl ]] && pdl=0 blocks=0
      [[ $mode == async-steps ]] && blocks=0
      t=$(SLUICE_CUDA_PDL=$pdl SLUICE_CUDA_CG_BLOCKS=$blocks "$cli" solve --backend cuda --stencil "$st" --n "$n" --ksp cg --pc jacobi --mode "${mode%-*}" \
        --max-it "$its" --fixed --repeat 3 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["time_s"])')
      python3 -c "print(f'$st n=$n $mode: {1e6*$t/$its:.2f} us/iteration')"
    done
  done
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  echo "== Nsight Compute ($ncu): kernels of iterations 5-7"
  metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size
  IFS=';' read -ra prof <<<"${PROFILE_PROBLEMS-2d5 447;2d5 4472;3d7 113;3d7 243}"
  for p in "${prof[@]}"; do
    read -r st n <<<"$p"
    echo "-- $st n=$n"
    "$ncu" --launch-skip 12 --launch-count 6 --csv --page raw --print-units base --metrics "$metrics" \
      "$cli" solve --backend cuda --stencil "$st" --n "$n" --ksp cg --pc jacobi --mode async \
      --max-it 20 --fixed ${PROFILE_ARGS:-} 2>/dev/null | grep -E '^"' | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
hdr = rows[0]
col = {h: i for i, h in enumerate(hdr)}
short = {"gpu__time_duration.sum": "us", "dram__bytes_read.sum": "MB read", "dram__bytes_write.sum": "MB written",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram %", "launch__registers_per_thread": "regs",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %", "launch__grid_size": "grid", "launch__block_size": "block"}
print("kernel | " + " | ".join(short.values()))
for r in rows[1:]:
    if not r[col["ID"]].isdigit(): continue
    vals = []
    for k in short:
        v = r[col[k]].replace(",", "")
        try:
            f = float(v)
            f = f / 1e3 if k.startswith("gpu__time") else f / 1e6 if k.startswith("dram__bytes") else f
            vals.append(f"{f:.1f}")
        except ValueError:
            vals.append(v)
    name = r[col["Kernel Name"]].split("(")[0].replace("void ", "").replace("unnamed>::", "")
    print(name + " | " + " | ".join(vals))
'
  done
  if command -v nsys >/dev/null; then
    echo "== nsys: host API time at a small size"
    nsys profile -o "$OUT/small" --force-overwrite true --stats=true "$cli" solve --backend cuda \
      --stencil 2d5 --n 64 --ksp cg --pc jacobi --mode async --max-it 500 --fixed 2>&1 | tail -n 60
    rm -f "$OUT"/small.*
  else
    echo "== no nsys"
  fi
} 2>&1 | tee "$log"
