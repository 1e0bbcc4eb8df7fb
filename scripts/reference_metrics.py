#!/usr/bin/env python3
"""Reference implementation of CD / HD / HD95, written the usual way (trimesh sampling,
scipy cKDTree, numpy), to check and time the Rust metric core against. Not part of the
product.

It reads the normalised meshes that `vision2cad bench eval --dump-meshes DIR` writes
(`ID.bin`: u64 vertex count, u64 triangle count, f64 xyz per vertex, u32 ijk per triangle,
little-endian; `order.json`), compares mesh i with mesh i+1 (cyclically) exactly as the
bench's metric-core figure does, and prints milliseconds per pair and the mean CD next to
the Rust figures from `DIR/rust_core.json`. The two sample with different generators, so
their CDs agree to sampling noise, not to the digit.

    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install trimesh scipy numpy
    /tmp/refvenv/bin/python scripts/reference_metrics.py /tmp/bench/meshes
"""

import argparse
import json
import os
import time
import zlib

import numpy as np
import trimesh
from scipy.spatial import cKDTree


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    nv, nt = np.frombuffer(data[:16], dtype="<u8")
    vertices = np.frombuffer(data[16 : 16 + 24 * int(nv)], dtype="<f8").reshape(-1, 3)
    faces = np.frombuffer(data[16 + 24 * int(nv) :], dtype="<u4").reshape(-1, 3)
    return trimesh.Trimesh(vertices=vertices, faces=faces, process=False)


def metrics(pred, gt, n, seed):
    p, _ = trimesh.sample.sample_surface(pred, n, seed=seed)
    g, _ = trimesh.sample.sample_surface(gt, n, seed=seed)
    d_pg, _ = cKDTree(g).query(p, k=1)
    d_gp, _ = cKDTree(p).query(g, k=1)
    cd = (np.mean(d_pg**2) + np.mean(d_gp**2)) * 1000.0
    hd = max(d_pg.max(), d_gp.max())
    # Nearest rank, as the Rust side: the value at rank ceil(0.95 n).
    rank = -(-len(d_pg) * 95 // 100)
    hd95 = max(np.partition(d_pg, rank - 1)[rank - 1], np.partition(d_gp, rank - 1)[rank - 1])
    return cd, hd, hd95


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("meshes", help="directory written by bench eval --dump-meshes")
    ap.add_argument("--points", default="8192,100000")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    with open(os.path.join(args.meshes, "order.json")) as f:
        order = json.load(f)
    meshes = [load(os.path.join(args.meshes, "%s.bin" % i)) for i in order]
    rust = {}
    rust_path = os.path.join(args.meshes, "rust_core.json")
    if os.path.exists(rust_path):
        with open(rust_path) as f:
            rust = {r["points"]: r for r in json.load(f)}
    out = []
    print("%8s %14s %14s %10s %16s %16s" % ("points", "python ms/pair", "rust ms/pair", "ratio", "python CD mean", "rust CD mean"))
    for n in [int(x) for x in args.points.split(",")]:
        seconds, cds = 0.0, []
        for i, id_ in enumerate(order):
            pred, gt = meshes[i], meshes[(i + 1) % len(meshes)]
            start = time.perf_counter()
            cd, hd, hd95 = metrics(pred, gt, n, zlib.crc32(id_.encode()))
            seconds += time.perf_counter() - start
            cds.append(cd)
        ms = seconds / len(order) * 1e3
        r = rust.get(n)
        rust_ms = r["ms_per_pair"] if r else float("nan")
        rust_cd = np.mean([p["cd"] for p in r["pairs"]]) if r else float("nan")
        print("%8d %14.2f %14.2f %9.1fx %16.4f %16.4f" % (n, ms, rust_ms, ms / rust_ms, np.mean(cds), rust_cd))
        out.append({"points": n, "python_ms_per_pair": ms, "rust_ms_per_pair": rust_ms, "python_cd_mean": float(np.mean(cds)), "rust_cd_mean": float(rust_cd)})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
