#!/usr/bin/env python3
"""Layering: the folders of src/ depend on each other one way only, and the partitioner's driver
is called by nothing in its folder. STYLE.md asks that dependencies point one way (base <- ir <-
... <- cli) so that each folder reads, builds and tests on top of the ones below it; a cycle
(cost/ calling runtime/ calling cost/, say) makes that impossible and creeps in unnoticed.

Usage: layering.py SRC_DIR BUILD_DIR

Folder A depends on folder B when
  (a) a file in src/A/ has `#include "B/..."` or `#include "../B/..."`, or
  (b) an object file of src/A/ (BUILD_DIR/CMakeFiles/gspmd_objects.dir/src/A/*.o) leaves a gs_*
      symbol undefined that an object file of src/B/ defines (`nm`): A's code calls B's.
It fails, printing the cycle and the include or call behind each step, when folders depend on
each other through any path; else it prints the folders in layers, each above all it uses.

Within src/partition/, partition.c is the driver: it calls the handlers and the shared helpers
(context.c), and a handler reaches it only through the context's partition_comp pointer. So no
other file there may use a symbol partition.c defines.
"""
import os
import re
import subprocess
import sys

src_dir, build_dir = sys.argv[1], sys.argv[2]
obj_root = os.path.join(build_dir, "CMakeFiles", "gspmd_objects.dir", "src")
folders = sorted(f for f in os.listdir(src_dir) if os.path.isdir(os.path.join(src_dir, f)))
deps = {f: {} for f in folders}  # folder -> {used folder: why}
failed = False

# (a) includes
include = re.compile(r'^\s*#\s*include\s+"(?:\.\./)?(\w+)/')
for f in folders:
    for root, _, names in os.walk(os.path.join(src_dir, f)):
        for name in sorted(n for n in names if n.endswith((".c", ".h"))):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    m = include.match(line)
                    if m and m.group(1) in deps and m.group(1) != f:
                        deps[f].setdefault(m.group(1), "%s includes %s" % (name, line.strip()))

# (b) symbols, from one nm over the library's objects (not stale ones of sources since moved)
objects = {}  # object path -> (folder, source file)
for f in folders:
    d = os.path.join(obj_root, f)
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith(".o") and os.path.exists(os.path.join(src_dir, f, name[:-2])):
            objects[os.path.join(d, name)] = (f, name[:-2])
out = subprocess.run(["nm", "-A", "-P"] + sorted(objects), check=True, capture_output=True,
                     text=True).stdout if objects else ""
defined, undefined = {}, []  # symbol -> (folder, file); [(folder, file, symbol)]
for line in out.splitlines():
    path, rest = line.split(": ", 1)
    sym, kind = rest.split()[:2]
    if sym.startswith("gs_") and kind == "U":
        undefined.append(objects[path] + (sym,))
    elif sym.startswith("gs_") and kind.isupper():
        defined[sym] = objects[path]
if not defined:
    sys.exit("layering: no object files under %s (build the library first)" % obj_root)
for f, src, sym in undefined:
    if sym in defined and defined[sym][0] != f:
        deps[f].setdefault(defined[sym][0], "%s/%s calls %s (%s/%s)" % (f, src, sym, *defined[sym]))

# No cycle: a depth-first walk that meets a folder still on its path has found one.
order, state = [], {}
def visit(f, path):
    global failed
    if state.get(f) == "done":
        return
    if state.get(f) == "open":
        cycle = path[path.index(f):] + [f]
        print("layering: folder cycle " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            print("  %s -> %s: %s" % (a, b, deps[a][b]))
        failed = True
        return
    state[f] = "open"
    for g in sorted(deps[f]):
        visit(g, path + [f])
    state[f] = "done"
    order.append(f)
for f in folders:
    visit(f, [])

# The partitioner's driver is called by no other file of its folder.
for f, src, sym in undefined:
    if f == "partition" and src != "partition.c" and defined.get(sym) == ("partition", "partition.c"):
        print("layering: partition/%s calls %s, defined in the driver partition.c" % (src, sym))
        failed = True

if failed:
    sys.exit(1)
# Layers: a folder sits one above the highest folder it uses.
level = {}
for f in order:
    level[f] = 1 + max((level[g] for g in deps[f]), default=-1)
layers = [sorted(f for f in folders if level[f] == k) for k in range(max(level.values()) + 1)]
print("layering: folder order: " + " < ".join(", ".join(fs) for fs in layers))
for f in order:
    print("  %-10s uses %s" % (f, ", ".join(sorted(deps[f])) or "-"))
