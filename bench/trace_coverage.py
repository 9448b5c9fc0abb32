#!/usr/bin/env python3
"""trace_coverage.py [GSPMD] — issue 28's trace measure: `gspmd run --trace` of a generated
2-device Transformer training step (tools/gen.py transformer --layers 2 --batch 8 --seq 128
--model 512 --ffn 2048 --heads 8 --mesh data=1,model=2 --train), 3 steps. Prints, per device,
how much of its wall time (first event's start to last event's end) the instruction events
cover (their union); issue 28 asks >= 90%. A timing: noisy on a shared machine."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def coverage(events):
    iv = sorted((e["ts"], e["ts"] + e["dur"]) for e in events)
    covered, cur = 0.0, None
    for a, b in iv:
        if cur is None or a > cur[1]:
            if cur:
                covered += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    covered += cur[1] - cur[0]
    return covered / (iv[-1][1] - iv[0][0]) if iv else 0.0


def main():
    gspmd = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "gspmd")
    with tempfile.TemporaryDirectory() as tmp:
        hlo, path = os.path.join(tmp, "t.hlo"), os.path.join(tmp, "t.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen.py"), "transformer",
                        "--layers", "2", "--batch", "8", "--seq", "128", "--model", "512", "--ffn",
                        "2048", "--heads", "8", "--mesh", "data=1,model=2", "--train", "-o", hlo],
                       check=True, capture_output=True)
        subprocess.run([gspmd, "run", hlo, "--num-partitions", "2", "--steps", "3", "--trace",
                        path], check=True, capture_output=True)
        ev = json.load(open(path))["traceEvents"]
        for pid in sorted({e["pid"] for e in ev if e["ph"] == "X"}):
            xs = [e for e in ev if e["ph"] == "X" and e["pid"] == pid]
            print("device %d: %d events cover %.1f%% of its wall time" % (
                pid, len(xs), 100 * coverage(xs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
