#!/usr/bin/env python3
"""trace_coverage.py [GSPMD] — issue 28's trace measure: `gspmd run --trace` of a generated
2-device Transformer training step (tools/gen.py transformer --layers 2 --batch 8 --seq 128
--model 512 --ffn 2048 --heads 8 --mesh data=1,model=2 --train), 3 steps. Prints, per device,
how much of its wall time (first event's start to last event's end) the instruction events
cover (their union; issue 28 asks >= 90%) and how much of it the device spent waiting for the
other inside collectives (the events' wait_us). Then the same program's predicted timeline
(`gspmd cost --machine this-cpu --trace`): per opcode, the time a step spends in it, measured
(device 0, mean of the 3 steps) beside predicted. A timing: noisy on a shared machine."""
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
            span = max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs)
            wait = sum(e["args"].get("wait_us", 0) for e in xs)
            print("device %d: %d events cover %.1f%% of its wall time; waiting in collectives "
                  "%.1f%%" % (pid, len(xs), 100 * coverage(xs), 100 * wait / span))
        cpath = os.path.join(tmp, "cost.json")
        subprocess.run([gspmd, "cost", hlo, "--num-partitions", "2", "--machine", "this-cpu",
                        "--trace", cpath], check=True, capture_output=True)
        cev = json.load(open(cpath))["traceEvents"]
        leaf = lambda e: e["cat"] not in ("while", "call", "conditional")
        meas, pred = {}, {}
        for e in ev:
            if e["ph"] == "X" and e["pid"] == 0 and leaf(e):
                meas[e["cat"]] = meas.get(e["cat"], 0) + e["dur"] / 3
        for e in cev:
            if e["ph"] == "X" and e["tid"] == 0 and leaf(e):
                pred[e["cat"]] = pred.get(e["cat"], 0) + e["dur"]
        print("| opcode | measured ms/step | predicted ms/step |")
        print("|---|---|---|")
        for op in sorted(set(meas) | set(pred), key=lambda o: -meas.get(o, 0))[:10]:
            print("| %s | %.2f | %.2f |" % (op, meas.get(op, 0) / 1e3, pred.get(op, 0) / 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
