#!/usr/bin/python3.11
"""A plain Python evaluation of STEP pairs, written the usual way, to time `vision2cad eval`
against (`vision2cad bench eval --against-python`). Not part of the product.

Per pair, in one process: FreeCAD's Part module reads both STEP files, normalises each to
the unit cube (bounding-box centre to the origin, largest extent to 1), computes the exact
IoU with one common and one fuse boolean, meshes both with MeshPart at the project's
deflections (linear 1e-3, angular 0.1), samples N points per shape by area with numpy, and
measures CD (x1000), HD and HD95 with scipy's cKDTree. It prints one JSON line per pair
and, last, a JSON summary with the seconds spent per stage.

    /usr/bin/python3.11 scripts/eval_reference.py PRED_DIR GT_DIR --points 8192

Needs Debian's freecad-python3, python3-numpy and python3-scipy.
"""

import argparse
import json
import os
import sys
import time
import zlib

sys.path.append("/usr/lib/freecad/lib")
sys.path.append("/usr/lib/freecad-python3/lib")

import FreeCAD  # noqa: E402
import MeshPart  # noqa: E402
import numpy as np  # noqa: E402
import Part  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

LINEAR, ANGULAR = 1e-3, 0.1


def read(path):
    shape = Part.Shape()
    shape.read(path)
    return shape


def normalise(shape):
    bb = shape.BoundBox
    extent = max(bb.XLength, bb.YLength, bb.ZLength)
    shape = shape.copy()
    shape.translate(-bb.Center)
    shape.scale(1.0 / extent)
    return shape


def sample(shape, n, rng):
    mesh = MeshPart.meshFromShape(Shape=shape, LinearDeflection=LINEAR, AngularDeflection=ANGULAR, Relative=False)
    points, facets = mesh.Topology
    v = np.array([(p.x, p.y, p.z) for p in points])
    f = np.array(facets, dtype=np.int64)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    area = np.linalg.norm(np.cross(b - a, c - a), axis=1)
    k = rng.choice(len(f), size=n, p=area / area.sum())
    s = np.sqrt(rng.random(n))[:, None]
    r = rng.random(n)[:, None]
    return (1 - s) * a[k] + s * (1 - r) * b[k] + s * r * c[k]


def distances(p, g):
    d_pg, _ = cKDTree(g).query(p, k=1)
    d_gp, _ = cKDTree(p).query(g, k=1)
    cd = (np.mean(d_pg**2) + np.mean(d_gp**2)) * 1000.0
    rank = -(-len(d_pg) * 95 // 100)
    hd95 = max(np.partition(d_pg, rank - 1)[rank - 1], np.partition(d_gp, rank - 1)[rank - 1])
    return float(cd), float(max(d_pg.max(), d_gp.max())), float(hd95)


def stems(directory):
    out = {}
    for name in os.listdir(directory):
        stem, ext = os.path.splitext(name)
        if ext.lower() in (".step", ".stp"):
            out[stem] = os.path.join(directory, name)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pred")
    ap.add_argument("gt")
    ap.add_argument("--points", type=int, default=8192)
    args = ap.parse_args()
    preds, truths = stems(args.pred), stems(args.gt)
    stage = {"read": 0.0, "normalise": 0.0, "booleans": 0.0, "mesh_and_sample": 0.0, "distances": 0.0}
    started = time.perf_counter()
    pairs = 0
    for id_ in sorted(truths):
        if id_ not in preds:
            continue
        pairs += 1
        out = {"id": id_}
        try:
            t = time.perf_counter()
            p, g = read(preds[id_]), read(truths[id_])
            stage["read"] += time.perf_counter() - t
            t = time.perf_counter()
            p, g = normalise(p), normalise(g)
            stage["normalise"] += time.perf_counter() - t
            t = time.perf_counter()
            common, fuse = p.common(g).Volume, p.fuse(g).Volume
            out["iou"] = common / fuse
            stage["booleans"] += time.perf_counter() - t
            t = time.perf_counter()
            rng = np.random.default_rng(zlib.crc32(id_.encode()))
            ps, gs = sample(p, args.points, rng), sample(g, args.points, rng)
            stage["mesh_and_sample"] += time.perf_counter() - t
            t = time.perf_counter()
            out["cd"], out["hd"], out["hd95"] = distances(ps, gs)
            stage["distances"] += time.perf_counter() - t
        except Exception as exc:  # a plain script: a failed pair is a line, not a stop
            out["error"] = str(exc)
        print(json.dumps(out), flush=True)
    total = time.perf_counter() - started
    print(json.dumps({"summary": {"pairs": pairs, "seconds": total, "stage_seconds": stage, "freecad": ".".join(FreeCAD.Version()[:3])}}))


if __name__ == "__main__":
    main()
