#!/usr/bin/env python3
"""paper_table.py [GSPMD] [--svg FILE] — the GSPMD paper's scaling table, predicted.

For the paper's two families at its device counts (tools/gen.py presets: dense Transformers of
64B..1T parameters on 128..2048 TPU v3 cores, GShard MoE of 78B..1T, a 64B pipeline of 16
stages), in bf16 as training steps: generate, propagate and partition (`gspmd cost --json
--machine tpu-v3`), and print the predicted step time, model FLOPs utilization (6 x parameters
used per token x tokens, as the paper counts it, over step time x peak) and per-device peak
memory next to the paper's published utilization (50-62%). Then the compile time of one model (the 1T dense Transformer)
partitioned for 128 .. 2048 devices (mesh data=N/16 x model=16): it must be flat in N. With --svg, writes a plot of
predicted step time and MFU against device count for each family (plain SVG, no dependencies).

Not a test: numbers depend on the cost model's machine profile (src/cost/machine.c), and the
generated models do no rematerialization, so activations may not fit a TPU v3 core's 16 GiB.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
GEN = os.path.join(ROOT, "tools", "gen.py")

DENSE = ["dense-64b-128", "dense-128b-256", "dense-256b-512", "dense-512b-1024", "dense-1t-2048"]
MOE = ["moe-78b-128", "moe-309b-512", "moe-1t-2048"]
PIPE = ["pipeline-64b-128"]


def presets():
    out = {}
    text = subprocess.run([sys.executable, GEN, "--list-presets"], capture_output=True,
                          text=True, check=True).stdout
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 6 and f[4] == "devices":
            out[f[0]] = {"params": f[3], "devices": int(f[5])}
    return out


def cost(gspmd, path, n, extra=()):
    r = subprocess.run([gspmd, "cost", path, "--num-partitions", str(n), "--json", "--machine",
                        "tpu-v3"] + list(extra), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("gspmd cost %s failed: %s" % (path, r.stderr.strip()[:400]))
    return json.loads(r.stdout)


def svg_plot(rows, path):
    """Two panels: step time (log) and MFU against devices (log2), one line per family."""
    import math
    W, H, P = 760, 300, 60
    colors = {"dense": "#1f77b4", "moe": "#d62728", "pipeline": "#9467bd"}
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" font-size="12">' % (W, H)]
    panels = [("predicted step time (s)", "step_s", True), ("predicted MFU", "mfu", False)]
    pw = (W - 3 * P) / 2
    for pi, (title, key, logy) in enumerate(panels):
        x0 = P + pi * (pw + P)
        ys = [r[key] for r in rows if r[key] > 0]
        lo, hi = min(ys), max(ys)
        if logy:
            lo, hi = math.log10(lo) - 0.1, math.log10(hi) + 0.1
        else:
            lo, hi = 0.0, max(0.7, hi * 1.1)

        def X(n):
            return x0 + (math.log2(n) - 7) / 4 * pw

        def Y(v):
            v = math.log10(v) if logy else v
            return H - P + -(v - lo) / (hi - lo) * (H - 2 * P)
        parts.append('<rect x="%g" y="%d" width="%g" height="%d" fill="none" stroke="#888"/>' %
                     (x0, P, pw, H - 2 * P))
        parts.append('<text x="%g" y="%d" text-anchor="middle">%s</text>' %
                     (x0 + pw / 2, P - 10, title))
        for n in (128, 256, 512, 1024, 2048):
            parts.append('<text x="%g" y="%d" text-anchor="middle">%d</text>' %
                         (X(n), H - P + 16, n))
        parts.append('<text x="%g" y="%d" text-anchor="middle">devices</text>' %
                     (x0 + pw / 2, H - P + 32))
        if not logy:  # the paper's published range
            parts.append('<rect x="%g" y="%g" width="%g" height="%g" fill="#2ca02c" '
                         'opacity="0.15"/>' % (x0, Y(0.62), pw, Y(0.50) - Y(0.62)))
            parts.append('<text x="%g" y="%g" fill="#2ca02c">paper: 50-62%%</text>' %
                         (x0 + 4, Y(0.62) - 4))
        for fam, color in colors.items():
            pts = [(X(r["devices"]), Y(r[key])) for r in rows if r["family"] == fam and r[key] > 0]
            if pts:
                parts.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                             (color, " ".join("%.1f,%.1f" % p for p in pts)))
                for p in pts:
                    parts.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (p[0], p[1],
                                                                                    color))
                parts.append('<text x="%.1f" y="%.1f" fill="%s">%s</text>' %
                             (pts[-1][0] + 5, pts[-1][1], color, fam))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    args = sys.argv[1:]
    svg = None
    if "--svg" in args:
        i = args.index("--svg")
        svg = args[i + 1]
        del args[i:i + 2]
    gspmd = os.path.abspath(args[0] if args else os.path.join(ROOT, "build", "gspmd"))
    info = presets()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print("Predicted on the tpu-v3 profile (one core per device), bf16 training steps "
              "generated by tools/gen.py:")
        print("  %-16s %7s %7s %9s %9s %7s %12s %10s" % ("model", "params", "devices",
                                                         "compile s", "step s", "MFU",
                                                         "peak GiB/dev", "paper MFU"))
        for name in DENSE + MOE + PIPE:
            path = os.path.join(tmp, name + ".hlo")
            g = subprocess.run([sys.executable, GEN, "preset", name, "--train", "--dtype", "bf16",
                                "-o", path], check=True, capture_output=True, text=True)
            # MFU as the paper counts it: 6 x parameters (used per token) x tokens per step.
            model = re.search(r"model FLOPs/step ([0-9.e+]+)", g.stderr)
            n = info[name]["devices"]
            c = cost(gspmd, path, n, ["--model-flops", model.group(1)] if model else [])
            fam = name.split("-")[0]
            row = {"family": "dense" if fam == "dense" else fam, "name": name,
                   "devices": n, "step_s": c["step_s"], "mfu": c.get("mfu", 0),
                   "peak": c["peak_bytes"] / 2 ** 30, "compile": c.get("compile_s", 0)}
            rows.append(row)
            print("  %-16s %7s %7d %9.3f %9.3g %6.1f%% %12.1f%s %10s" % (
                name, info[name]["params"], n, row["compile"], row["step_s"], 100 * row["mfu"],
                row["peak"], "" if c["fits"] else "!", "50-62%"))
        print("  (! = does not fit 16 GiB: the generated steps keep every activation for the "
              "backward pass, no rematerialization)")
        # Compile time against N for one model: the 1T dense Transformer on 128..2048 devices.
        print("\nCompile time (propagate + partition, best of 10) of the 1T dense Transformer "
              "on data=N/16 x model=16 for N devices:")
        times = {}
        for n in (128, 256, 512, 1024, 2048):
            path = os.path.join(tmp, "flat-%d.hlo" % n)
            subprocess.run([sys.executable, GEN, "transformer", "--layers", "80", "--batch",
                            "512", "--seq", "1024", "--model", "32768", "--ffn", "131072",
                            "--heads", "256", "--mesh", "data=%d,model=16" % (n // 16),
                            "--train", "--dtype", "bf16", "-o", path], check=True,
                           capture_output=True)
            times[n] = min(cost(gspmd, path, n)["compile_s"] for _ in range(10))
            print("  N = %5d: %.4f s" % (n, times[n]))
        print("  2048 / 128: %.2f (goal <= 1.3); 1T model under 10 s: %s" % (
            times[2048] / times[128], "yes" if max(times.values()) < 10 else "NO"))
    if svg:
        svg_plot(rows, svg)
        print("\nwrote %s" % svg)


if __name__ == "__main__":
    main()
