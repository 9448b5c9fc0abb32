#!/usr/bin/env python3
"""XLA's own SPMD partitioner tests outside the public conformance corpus, measured as the
corpus's collectives stage measures them: a stand-in for the sealed held-out half.

Usage: xla_partitioner_tests.py SPMD_PARTITIONER_TEST_CC [--gspmd build/gspmd]
                                [--corpus ../shared/conformance/xla] [--all] [--verify]

SPMD_PARTITIONER_TEST_CC is xla/service/spmd/spmd_partitioner_test.cc from an XLA checkout
(`git show HEAD:xla/service/spmd/spmd_partitioner_test.cc` of a snapshot the tool library's
`fetch` brings). Each TEST's first raw-string module and its device count are taken; tests the
public corpus holds (case ids `partition_<TestName>`) are left out, and so, unless --all, are
those the corpus's split would make public (the last hex digit of sha1 of the id even): the rest
are the held-out kind. For each test whose expectations name a collective (op::AllReduce(,
op::AllGather(, op::AllToAll(, op::CollectivePermute(, op::ReduceScatter(), the case passes when
`gspmd partition FILE --num-partitions N` uses every kind named. With --verify, each is also run
with `gspmd run --verify --max-memory 8G` (a refusal for memory counts apart).

Prints the rate and the misses. No timing: the figure is a count.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile

KINDS = {"AllReduce": "all-reduce", "AllGather": "all-gather", "AllToAll": "all-to-all",
         "CollectivePermute": "collective-permute", "ReduceScatter": "reduce-scatter"}


def tests_of(text):
    """(name, module text, devices, body) for each TEST with a raw-string module."""
    out = []
    for t in re.split(r"\nTEST_[PF]\(", text)[1:]:
        m = re.match(r"\s*\w+,\s*(\w+)\)", t)
        r = re.search(r'R"\((.*?)\)"', t, re.S)
        d = re.search(r"num_devices=\*/\s*(\d+)", t) or \
            re.search(r"PartitionComputation\(\s*\w+,\s*(\d+)", t)
        if m and r and d:
            out.append((m.group(1), r.group(1), int(d.group(1)), t[r.end():]))
    return out


def held_out(case_id):
    return int(hashlib.sha1(case_id.encode()).hexdigest()[-1], 16) % 2 == 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test_cc")
    ap.add_argument("--gspmd", default="build/gspmd")
    ap.add_argument("--corpus", default=os.path.join("..", "shared", "conformance", "xla"))
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--verify", action="store_true")
    a = ap.parse_args()
    public = set(os.listdir(a.corpus)) if os.path.isdir(a.corpus) else set()
    ok = total = 0
    misses, verify = [], {"match": 0, "memory": 0, "other": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name, module, n, body in tests_of(open(a.test_cc).read()):
            cid = "partition_" + name
            if cid in public or (not a.all and not held_out(cid)):
                continue
            want = {v for k, v in KINDS.items() if re.search(r"op::" + k + r"\(", body)}
            path = os.path.join(tmp, name + ".hlo")
            with open(path, "w") as f:
                f.write(module)
            if want:
                p = subprocess.run([a.gspmd, "partition", path, "--num-partitions", str(n)],
                                   capture_output=True, text=True, timeout=300)
                have = {v for v in KINDS.values()
                        if re.search(" " + v + r"(-start)?\(", p.stdout)}
                total += 1
                lack = sorted(want - have)
                if lack:
                    misses.append((name, lack if p.returncode == 0 else ["partition failed"]))
                else:
                    ok += 1
            if a.verify:
                p = subprocess.run([a.gspmd, "run", path, "--num-partitions", str(n),
                                    "--no-propagate", "--verify", "--max-memory", "8G"],
                                   capture_output=True, text=True, timeout=600)
                if p.returncode == 0:
                    verify["match"] += 1
                elif "at its peak, more than" in p.stderr:
                    verify["memory"] += 1
                else:
                    verify["other"].append(name)
    print("collectives: %d / %d (%.1f%%)" % (ok, total, 100.0 * ok / max(total, 1)))
    for name, lack in misses:
        print("  %s: no %s" % (name, ", ".join(lack)))
    if a.verify:
        print("verify: %d match, %d refused for memory, %d other: %s" %
              (verify["match"], verify["memory"], len(verify["other"]),
               " ".join(verify["other"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
