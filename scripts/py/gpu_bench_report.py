"""The report of gpu-bench.sh: gpu-bench.md and gpu-bench.json from what its steps wrote.

  gpu_bench_report.py OUT BACKEND BATCH

Staged beside the staged gpu-bench.sh (scripts/gpu-bench.sh --stage DIR copies it to
DIR/py/), which runs it from DIR. Reads OUT's steps.jsonl, modes.json, in-vram-dmon.json,
dmon.txt (nvidia-smi dmon's rows; the file must exist), gpu.txt, probe.json, step-phases*.json,
sweep-B.json, torch.out and torch-B.out (the PyTorch peer's JSON lines), wgpu-modes.json and
.err, launches.json and ncu.out (Nsight Compute's CSV), each where present, and BASE (the
baseline's label) from the working directory. BATCH is the run's batch (the peer's figures at
that batch are in torch.out). Writes OUT/gpu-bench.md and OUT/gpu-bench.json and prints the
Markdown, whose last line is
`in-vram/on-the-fly <R>x, in-vram busy <B>%, grin/pytorch <P>x, prediction error <E> points`.
"""
import collections, csv, json, os, re, statistics, sys
out, backend, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
steps = [json.loads(l) for l in open(os.path.join(out, "steps.jsonl"))] if os.path.exists(os.path.join(out, "steps.jsonl")) else []
modes = load("modes.json")
dmon_run = load("in-vram-dmon.json")
gpu = open(os.path.join(out, "gpu.txt")).read().strip() if os.path.exists(os.path.join(out, "gpu.txt")) else backend

# nvidia-smi dmon: "# gpu sm mem enc dec ..." header, then one row per second.
sm = []
for line in open(os.path.join(out, "dmon.txt")):
    if line.startswith("#") or not line.strip():
        continue
    parts = line.split()
    if len(parts) > 1 and parts[1].isdigit():
        sm.append(int(parts[1]))
dmon_sm = statistics.median(sm) if sm else None

rows = {r["mode"]: r for r in (modes or {}).get("rows", [])}
probe_run = load("probe.json")
phases = load("step-phases.json")
phases_burn = load("step-phases-burn.json")
phases_base = load("step-phases-base.json")
phases_large, phases_large_base = load("step-phases-grin-large.json"), load("step-phases-grin-base-large.json")
base_label = open("BASE").read().strip() if os.path.exists("BASE") else "the staged baseline"

def peer(name):
    p = os.path.join(out, name)
    lines = [l for l in open(p) if l.startswith("{")] if os.path.exists(p) else []
    return json.loads(lines[-1]) if lines else None

sweep = []
for name in sorted(os.listdir(out)):
    m = re.fullmatch(r"sweep-(\d+)\.json", name)
    if m:
        r, b = load(name)["rows"][0], int(m.group(1))
        t = peer("torch.out" if b == batch else f"torch-{b}.out")
        sweep.append({"batch": b, "steps_per_s": r["steps_per_s"], "samples_per_s": r["samples_per_s"], "busy_pct": r["busy_pct"],
                      "torch_steps_per_s": t["steps_per_s"] if t else None})
sweep.sort(key=lambda r: r["batch"])
torch_res = peer("torch.out")

def f(v, fmt="{:.1f}"):
    return "n/a" if v is None else fmt.format(v)
otf, vram = rows.get("on-the-fly"), rows.get("in-vram")
# Where the budget ran out before the modes, the probe's in-VRAM run stands in.
if vram is None and probe_run:
    vram = probe_run["rows"][0]
ratio = vram["steps_per_s"] / otf["steps_per_s"] if otf and vram else None
peer_ratio = vram["steps_per_s"] / torch_res["steps_per_s"] if vram and torch_res else None
errors = [abs(r["balance_busy_pct"] - r["busy_pct"]) for r in rows.values()]
pred_err = max(errors) if errors else None

md = []
md.append(f"# gpu-bench ({backend}: {gpu})\n")
if modes:
    md.append(f"Same model, data and batch ({modes['batch_size']}, {modes['width']}x{modes['height']}), {modes['steps']} steps per mode; each figure is the median over the log intervals after the first (warm-up).\n")
    md.append("| mode | steps/s | samples/s | data wait ms/step | step ms | busy % (grin) | predicted (balance) | simulated (--from-run) | loaders |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows.values():
        md.append(f"| {r['mode']} | {r['steps_per_s']:.2f} | {r['samples_per_s']:.1f} | {r['wait_ms_per_step']:.2f} | {r['step_ms']:.2f} | {r['busy_pct']:.1f} | {r['balance_busy_pct']:.1f} | {r['simulated_busy_pct']:.1f} | {r['loaders']} |")
    b = modes["balance"]
    md.append(f"\nBalance figures: T_g {b['tg_s']*1e3:.3f} ms/sample, C {b['workers']}, T_i {b['ti_s']*1e3:.3f} ms, T_s {b['ts_s']*1e3:.3f} ms, T_u {b['tu_s']*1e3:.3f} ms, T_c {b['tc_s']*1e3:.3f} ms, T_r {b['tr_s']*1e3:.3f} ms ({b['tr_from']}).\n")
if dmon_run:
    r = dmon_run["rows"][0]
    check = f"nvidia-smi dmon SM utilisation median {dmon_sm:.0f}% over {len(sm)} one-second samples" if sm else f"no nvidia-smi sample ({backend} backend)"
    md.append(f"Longer in-VRAM run ({dmon_run['steps']} steps): {r['steps_per_s']:.2f} steps/s, grin busy {r['busy_pct']:.1f}%; {check}.\n")
if sweep:
    md.append("| in-VRAM batch | steps/s | samples/s | busy % | PyTorch steps/s | grin/PyTorch |")
    md.append("|---:|---:|---:|---:|---:|---:|")
    for s in sweep:
        t = s["torch_steps_per_s"]
        md.append(f"| {s['batch']} | {s['steps_per_s']:.2f} | {s['samples_per_s']:.1f} | {s['busy_pct']:.1f} | {f(t, '{:.2f}')} | {f(s['steps_per_s'] / t if t else None, '{:.2f}x')} |")
    md.append("")
wgpu_modes = load("wgpu-modes.json")
if wgpu_modes:
    err = os.path.join(out, "wgpu-modes.err")
    said = [l.strip() for l in open(err) if "device 0: " in l] if os.path.exists(err) else []
    wdev = said[0].split("device 0: ", 1)[1][:-1] if said else "?"
    md.append(f"wgpu on {wdev}, same config, {wgpu_modes['steps']} steps per mode:\n")
    md.append("| mode | steps/s | samples/s | data wait ms/step | step ms | busy % (grin) | predicted (balance) |")
    md.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in wgpu_modes["rows"]:
        md.append(f"| {r['mode']} | {r['steps_per_s']:.2f} | {r['samples_per_s']:.1f} | {r['wait_ms_per_step']:.2f} | {r['step_ms']:.2f} | {r['busy_pct']:.1f} | {r['balance_busy_pct']:.1f} |")
    md.append("")
if torch_res:
    md.append(f"PyTorch {torch_res['torch']} eager peer ({torch_res['device']}, batch {torch_res['batch']}, {torch_res['params_with_bn_stats']} params counted as grin counts them, data on the device): {torch_res['steps_per_s']:.2f} steps/s; grin in-VRAM / PyTorch = {f(peer_ratio, '{:.2f}')}x.\n")
else:
    md.append("PyTorch peer: not run (see steps below).\n")
# Launches per step: grin's (CubeCL's log, `grin bench step --launches`) and the peer's (its CUDA
# kernels, torch.profiler). Without a GPU, the CUDA step is predicted from grin's count and the
# host's cost per launch measured on CUDA: the sixth CUDA run's host-bound step, 30.7 ms for about
# 1,600 launches (docs/benchmarks.md), Fusion's and autodiff's bookkeeping included, so the
# prediction is a ceiling on the host's share of a step, not a GPU figure.
HOST_US_PER_LAUNCH = 19.0
counted = load("launches.json")
launches = counted["launches"] if counted else None
predicted = None
if launches:
    total = launches["step_per_step"] + launches["batch_per_step"]
    torch_launches = torch_res.get("launches_per_step") if torch_res else None
    md.append(f"Kernel launches per step (CubeCL's log, {counted['engine']}, after warm-up): {launches['step_per_step']:.0f} in the step, {launches['batch_per_step']:.0f} cutting the in-VRAM batch; PyTorch's CUDA kernels per step: {f(torch_launches, '{:.0f}')}.\n")
    md.append("| kernel | launches per step |")
    md.append("|---|---:|")
    for name, n in sorted(launches["by_kernel"], key=lambda kv: -kv[1])[:12]:
        md.append(f"| `{name}` | {n / launches['steps']:.1f} |")
    md.append("")
    if backend != "cuda":
        predicted = {"launches": total, "host_us_per_launch": HOST_US_PER_LAUNCH, "step_ms": total * HOST_US_PER_LAUNCH / 1e3}
        md.append(f"**Prediction, not a GPU figure:** on CUDA the host would spend about {predicted['step_ms']:.1f} ms a step launching these {total:.0f} kernels ({HOST_US_PER_LAUNCH:.0f} µs a launch, the sixth CUDA run's cost with Fusion and autodiff); the step takes that or the GPU's own time, whichever is longer.\n")
large = sweep[-1]["batch"] if sweep else "the largest"
for label, figures in (("grin's flat AdamW", phases), ("Burn's AdamW adaptor", phases_burn), (f"baseline binary: {base_label}", phases_base),
                       (f"batch {large}", phases_large), (f"batch {large}, baseline binary: {base_label}", phases_large_base)):
    if figures:
        m = figures["median"]
        md.append(f"Step phases (`grin bench step`, {label}, in-VRAM batches, each phase synced): {m['steps_per_s']:.2f} steps/s; ms per step: batch {m['batch_ms']:.2f}, forward {m['forward_ms']:.2f}, loss {m['loss_ms']:.2f}, backward {m['backward_ms']:.2f}, optimizer {m['optimizer_ms']:.2f}.\n")
probe = next((s for s in steps if s["step"] == "probe" and "seconds" in s), None)
if probe:
    r = probe_run["rows"][0] if probe_run else None
    said = f": {r['steps_per_s']:.2f} steps/s in VRAM" if r else ""
    md.append(f"Cold start: the first process (the 200-step in-VRAM probe{said}) took {probe['seconds']} s, kernel compilation and autotune included.\n")
# Nsight Compute's launches (ncu.out: CSV rows, the program's own lines between them), summed by
# kernel name (template arguments cut): the kernels that take the GPU's time.
ncu_rows = [l for l in open(os.path.join(out, "ncu.out"))] if os.path.exists(os.path.join(out, "ncu.out")) else []
ncu_rows = list(csv.reader([l for l in ncu_rows if l.startswith('"')]))
ncu_top = []
if len(ncu_rows) > 2:
    head = ncu_rows[0]
    name_at, time_at = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
    by_name, counts, slowest = collections.Counter(), collections.Counter(), {}
    for row in ncu_rows[2:]:  # the second row holds the units (ns)
        try:
            name, ns = re.split(r"[<(]", row[name_at])[0], float(row[time_at].replace(",", ""))
        except (IndexError, ValueError):
            continue  # a row cut short or without a figure: left out, not a failed report
        by_name[name] += ns
        counts[name] += 1
        slowest[name] = max(slowest.get(name, 0.0), ns)
    total = sum(by_name.values())
    md.append(f"Nsight Compute at batch {large}: {len(ncu_rows) - 2} launches, {total / 1e6:.1f} ms of GPU time; the kernels that took most:\n")
    md.append("| kernel | launches | ms | share | slowest launch ms |")
    md.append("|---|---:|---:|---:|---:|")
    for name, ns in by_name.most_common(10):
        ncu_top.append({"kernel": name, "launches": counts[name], "ms": ns / 1e6, "slowest_ms": slowest[name] / 1e6})
        md.append(f"| `{name[:60]}` | {counts[name]} | {ns / 1e6:.2f} | {ns / total * 100:.1f}% | {slowest[name] / 1e6:.2f} |")
    md.append("")
md.append("| step | status |")
md.append("|---|---|")
for s in steps:
    md.append(f"| {s['step']} | {s['status']}{(': ' + s['error']) if s.get('error') else ''} |")
x = lambda v: "n/a" if v is None else f"{v:.2f}x"
last = f"in-vram/on-the-fly {x(ratio)}, in-vram busy {f(vram['busy_pct'] if vram else None)}%, grin/pytorch {x(peer_ratio)}, prediction error {f(pred_err)} points"
md.append("\n" + last)
open(os.path.join(out, "gpu-bench.md"), "w").write("\n".join(md) + "\n")
json.dump({"backend": backend, "device": gpu, "modes": modes, "wgpu_modes": wgpu_modes, "in_vram_dmon": dmon_run, "dmon_sm_median_pct": dmon_sm,
           "dmon_samples": sm, "sweep": sweep, "step_phases": phases, "step_phases_burn_adamw": phases_burn, "step_phases_base": phases_base, "step_phases_large": phases_large, "step_phases_large_base": phases_large_base, "ncu_top": ncu_top, "torch": torch_res, "steps": steps,
           "launches": launches, "predicted_cuda_step": predicted,
           "in_vram_over_on_the_fly": ratio, "grin_over_pytorch": peer_ratio, "prediction_error_points": pred_err},
          open(os.path.join(out, "gpu-bench.json"), "w"), indent=2)
print("\n".join(md))
