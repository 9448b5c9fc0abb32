#!/usr/bin/env python3
"""check_trace.py GSPMD — `gspmd run --trace`: a generated Transformer training step on 2
devices, 2 steps, traced. The file must be trace-event JSON (what Perfetto and chrome://tracing
load): an object with "traceEvents"; one process per device, named "device <d>"; every
instruction a complete event ("ph": "X") with a name, its opcode as category, and ts, dur >= 0
(microseconds); the collectives carrying their bytes and the time spent waiting for the other
device (within the collective's duration); each device's events properly nested (an
event that starts inside another ends inside it: a while loop encloses its body's). An
unwritable trace file is an error before anything runs. `gspmd cost --trace` of the same
program: the same format, one process, every event an instruction the run ran, loops' iterations
all laid out (as many dots as a step of the run, each one the run ran), the last event ending
at the predicted step time. (How much of the wall time the events
cover is a timing, measured in bench/, not here.)"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "..", "tools", "gen.py")


def main():
    gspmd = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        hlo = os.path.join(tmp, "t.hlo")
        subprocess.run([sys.executable, GEN, "transformer", "--layers", "2", "--batch", "4",
                        "--seq", "8", "--model", "16", "--ffn", "32", "--heads", "4", "--mesh",
                        "data=1,model=2", "--train", "-o", hlo], check=True, capture_output=True)
        path = os.path.join(tmp, "trace.json")
        p = subprocess.run([gspmd, "run", hlo, "--num-partitions", "2", "--steps", "2",
                            "--trace", path], capture_output=True, text=True)
        if p.returncode != 0:
            print("FAIL: run --trace exited %d: %s" % (p.returncode, p.stderr[-400:]))
            return 1
        with open(path) as f:
            j = json.load(f)
        ev = j["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in ev
                 if e["ph"] == "M" and e["name"] == "process_name"}
        assert names == {0: "device 0", 1: "device 1"}, names
        xs = [e for e in ev if e["ph"] == "X"]
        assert xs, "no instruction events"
        n_coll, waited = 0, 0.0
        for e in xs:
            assert e["pid"] in names and e["name"] and e["cat"] == e["args"]["op"], e
            assert e["ts"] >= 0 and e["dur"] >= 0, e
            if e["cat"] in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                            "collective-permute"):
                assert e["args"]["bytes"] >= 0, e
                # the time blocked waiting for the other device falls inside the collective
                assert 0 <= e["args"]["wait_us"] <= e["dur"] + 0.002, e
                waited += e["args"]["wait_us"]
                n_coll += 1
        assert n_coll > 0, "no collective in a model-parallel step"
        assert waited > 0, "no collective waited at all (the first to arrive always does)"
        for pid in names:
            stack = []
            eps = 0.002  # the file's microseconds have 3 decimals
            for e in sorted((e for e in xs if e["pid"] == pid), key=lambda e: (e["ts"], -e["dur"])):
                while stack and e["ts"] >= stack[-1] - eps:
                    stack.pop()
                end = e["ts"] + e["dur"]
                assert not stack or end <= stack[-1] + eps, ("events overlap", e)
                stack.append(end)
        whiles = sum(1 for e in xs if e["cat"] == "while")
        assert whiles >= 2 * 2, "the forward and backward loops of each step and device"
        # `cost --trace`: the prediction of the same program, in the same format.
        cpath = os.path.join(tmp, "cost.json")
        p = subprocess.run([gspmd, "cost", hlo, "--num-partitions", "2", "--machine", "this-cpu",
                            "--json", "--trace", cpath], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        step_us = json.loads(p.stdout)["step_s"] * 1e6
        with open(cpath) as f:
            cev = json.load(f)["traceEvents"]
        pname = [e for e in cev if e["ph"] == "M" and e["name"] == "process_name"]
        assert len(pname) == 1 and pname[0]["args"]["name"].startswith(
            "device 0, predicted on this-cpu"), pname
        cxs = [e for e in cev if e["ph"] == "X"]
        ran = {e["name"] for e in xs}
        for e in cxs:
            assert e["dur"] >= 0 and e["ts"] >= 0 and e["cat"] == e["args"]["op"], e
            if e["cat"] in ("dot", "while", "all-reduce", "all-gather", "reduce-scatter"):
                assert e["name"] in ran, ("predicted an instruction the run never ran", e)
        ends = [e["ts"] + e["dur"] for e in cxs if e["tid"] == 0]
        assert abs(max(ends) - step_us) <= 1e-6 * step_us + 0.01, (max(ends), step_us)
        cwhiles = sum(1 for e in cxs if e["cat"] == "while")
        assert cwhiles == whiles // 4, (cwhiles, whiles)  # a step of one device
        # each loop's iterations all laid out: as many dots as one step of the run ran
        rdots = sum(1 for e in xs if e["cat"] == "dot" and e["pid"] == 0) / 2
        cdots = sum(1 for e in cxs if e["cat"] == "dot")
        assert cdots == rdots, (cdots, rdots)
        bad = subprocess.run([gspmd, "cost", hlo, "--num-partitions", "2", "--trace",
                              os.path.join(tmp, "no", "such", "dir.json")],
                             capture_output=True, text=True)
        assert bad.returncode == 1 and "cannot write the trace" in bad.stderr, bad.stderr
        bad = subprocess.run([gspmd, "run", hlo, "--num-partitions", "2", "--trace",
                              os.path.join(tmp, "no", "such", "dir.json")],
                             capture_output=True, text=True)
        assert bad.returncode == 1 and "cannot write the trace" in bad.stderr, bad.stderr
        print("ok: %d events on 2 devices, %d collectives, %d while loops" % (len(xs), n_coll,
                                                                            whiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
