"""Standalone tests for v2c_codebox.py (plain python, no pytest; exits non-zero on failure).

    /usr/bin/python3.11 freecad-bridge/python/test_v2c_codebox.py [name-filter ...]

Every case runs `python3.11 v2c_codebox.py req.json` in its own process and temp directory.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
CODEBOX = os.path.join(HERE, "v2c_codebox.py")
PYTHON = "/usr/bin/python3.11" if os.path.exists("/usr/bin/python3.11") else sys.executable
FREECAD_PATHS = ("/usr/lib/freecad-python3/lib", "/usr/lib/freecad/Mod")

PAD_SCRIPT = """
body = doc.addObject('PartDesign::Body', 'Body')
xy = [f for f in body.Origin.OriginFeatures if f.Role == 'XY_Plane'][0]
sketch = body.newObject('Sketcher::SketchObject', 'Sketch')
sketch.Support = (xy, [''])
sketch.MapMode = 'FlatFace'
pts = [Vector(0, 0, 0), Vector(20, 0, 0), Vector(20, 10, 0), Vector(0, 10, 0)]
for i in range(4):
    sketch.addGeometry(Part.LineSegment(pts[i], pts[(i + 1) % 4]), False)
for i in range(4):
    sketch.addConstraint(Sketcher.Constraint('Coincident', i, 2, (i + 1) % 4, 1))
pad = body.newObject('PartDesign::Pad', 'Pad')
pad.Profile = sketch
pad.Length = 10
doc.recompute()
print('pad volume', body.Shape.Volume)
"""


class Case:
    """One run: a temp dir with out/ (the output dir) and sibling/ (a dir the script may not read)."""

    def __init__(self, name):
        self.root = tempfile.mkdtemp(prefix="v2c_codebox_%s_" % name)
        self.out = os.path.join(self.root, "out")
        self.sibling = os.path.join(self.root, "sibling")
        os.mkdir(self.out)
        os.mkdir(self.sibling)
        with open(os.path.join(self.sibling, "secret.txt"), "w") as f:
            f.write("secret\n")

    def run(self, script, cpu_seconds=120, memory_mb=6144, read_roots=(), timeout=300):
        req = {
            "script": textwrap.dedent(script),
            "out_dir": self.out,
            "read_roots": list(read_roots),
            "cpu_seconds": cpu_seconds,
            "memory_mb": memory_mb,
        }
        path = os.path.join(self.root, "req.json")
        with open(path, "w") as f:
            json.dump(req, f)
        proc = subprocess.run([PYTHON, CODEBOX, path], capture_output=True, text=True, timeout=timeout, cwd=self.root)
        self.returncode = proc.returncode
        self.stdout, self.stderr = proc.stdout, proc.stderr
        self.result = None
        for line in reversed(proc.stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict) and "kind" in value:
                    self.result = value
                    break
        return self.result

    def outputs(self):
        return [n for n in ("model.step", "model.FCStd") if os.path.exists(os.path.join(self.out, n))]

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


def plain_freecad(code, timeout=120):
    """Run code in a fresh, unsandboxed FreeCAD process; return its stdout."""
    prelude = "import sys\nsys.path += %r\nimport FreeCAD, Part, Sketcher, PartDesign\n" % (list(FREECAD_PATHS),)
    proc = subprocess.run([PYTHON, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError("helper process failed: %s\n%s" % (proc.returncode, proc.stderr[-2000:]))
    return proc.stdout


def check(cond, msg, case=None):
    if not cond:
        detail = ""
        if case is not None:
            detail = "\n  result: %s\n  returncode: %s\n  stderr tail: %s" % (
                json.dumps(case.result, indent=None)[:3000] if case.result else None,
                case.returncode,
                case.stderr[-1500:],
            )
        raise AssertionError(msg + detail)


def expect(case, kind, outputs=None):
    r = case.result
    check(r is not None, "no JSON result", case)
    check(r["kind"] == kind, "kind %r, expected %r" % (r["kind"], kind), case)
    check(r["ok"] == (kind == "ok"), "ok flag does not match kind", case)
    if outputs is not None:
        check(sorted(case.outputs()) == sorted(outputs), "outputs %s, expected %s" % (case.outputs(), outputs), case)
    if kind == "sandbox":
        check(r["error"].startswith("sandbox: "), "sandbox error must start with 'sandbox: '", case)
    if kind == "ok":
        check(r["violations"] == [], "an ok run recorded violations", case)
    return r


BOTH = ["model.step", "model.FCStd"]

# ---------------------------------------------------------------------------- cases


def test_a_partdesign_pad(case):
    case.run(PAD_SCRIPT)
    r = expect(case, "ok", BOTH)
    check(r["solids"] == 1, "one solid", case)
    check(abs(r["volume"] - 2000.0) < 1e-6, "volume 2000", case)
    check(r["valid"] is True, "valid", case)
    check(r["pads_pockets"] == 1, "pads_pockets 1", case)
    check(r["parametric"] is True and r["result_object"] == "Body", "a single body is the result", case)
    check("pad volume 1999.99" in r["output"] or "pad volume 2000" in r["output"], "stdout captured", case)
    check(r["unguarded"] == [], "every FreeCAD API was wrapped: %s" % r["unguarded"], case)
    # what the evaluator does: re-open in a fresh process, set the Pad to 11, recompute
    out = plain_freecad(
        """
        d = FreeCAD.openDocument(%r)
        pad = d.getObject('Pad')
        pad.Length = 11
        d.recompute()
        print('REOPEN', d.getObject(%r).Shape.Volume, pad.State)
        """
        % (os.path.join(case.out, "model.FCStd"), r["result_object"])
    )
    line = [l for l in out.splitlines() if l.startswith("REOPEN")][-1]
    check(abs(float(line.split()[1]) - 2200.0) < 1e-6, "after Length=11 the volume must be 2200: %s" % line)
    check("Invalid" not in line, "the reopened Pad recomputes: %s" % line)
    # the STEP holds the same solid
    out = plain_freecad(
        "s = Part.Shape(); s.read(%r); print('STEP', len(s.Solids), s.Volume)" % os.path.join(case.out, "model.step")
    )
    line = [l for l in out.splitlines() if l.startswith("STEP")][-1].split()
    check(line[1] == "1" and abs(float(line[2]) - 2000.0) < 1e-3, "STEP solid: %s" % line)


def test_b_part_result_box(case):
    case.run("result = Part.makeBox(10, 20, 30)\n")
    r = expect(case, "ok", BOTH)
    check(abs(r["volume"] - 6000.0) < 1e-6 and r["solids"] == 1, "volume 6000", case)
    check(r["parametric"] is False and r["result_object"] == "V2C_Result", "result= gives a Part::Feature", case)
    out = plain_freecad(
        "d = FreeCAD.openDocument(%r); o = d.getObject('V2C_Result'); print('R', o.TypeId, o.Shape.Volume)"
        % os.path.join(case.out, "model.FCStd")
    )
    check("R Part::Feature 6000" in out.replace("6000.0", "6000"), "saved V2C_Result: %s" % out[-300:])


def test_c_read_etc_hostname(case):
    case.run("""
        result = Part.makeBox(1, 1, 1)
        try:
            text = open('/etc/hostname').read()
        except Exception as e:
            print('caught', e)
            raise RuntimeError('something else')
    """)
    r = expect(case, "sandbox", [])
    check("/etc/hostname" in r["error"] and "open" in r["error"], "names the operation and path", case)


def test_c_read_sibling_caught(case):
    secret = os.path.join(case.sibling, "secret.txt")
    case.run("""
        result = Part.makeBox(1, 1, 1)
        try:
            open(%r).read()
        except PermissionError:
            pass   # swallowed: still a violation
    """ % secret)
    r = expect(case, "sandbox", [])
    check(secret in r["error"], "names the path", case)


def test_c_read_roots_allowed(case):
    secret = os.path.join(case.sibling, "secret.txt")
    case.run("assert open(%r).read() == 'secret\\n'\nresult = Part.makeBox(1, 1, 1)\n" % secret, read_roots=[case.sibling])
    expect(case, "ok", BOTH)


def test_c_write_to_read_root_denied(case):
    case.run("open(%r, 'w').write('x')\n" % os.path.join(case.sibling, "new.txt"), read_roots=[case.sibling])
    expect(case, "sandbox", [])
    check(not os.path.exists(os.path.join(case.sibling, "new.txt")), "nothing written", case)


def test_c_listdir_and_escape(case):
    case.run("import os\nprint(os.listdir(%r))\n" % case.sibling)
    expect(case, "sandbox", [])
    case.run("open(%r + '/../sibling/secret.txt').read()\n" % case.out)
    expect(case, "sandbox", [])
    case.run("open('../sibling/secret.txt').read()\n")
    expect(case, "sandbox", [])


def test_d_import_subprocess(case):
    case.run("import subprocess\nsubprocess.run(['true'])\n")
    r = expect(case, "sandbox", [])
    check("subprocess" in r["error"], "names the module", case)


def test_d_other_blocked(case):
    for script, word in (
        ("import ctypes\n", "ctypes"),
        ("import socket\n", "socket"),
        ("import os\nos.system('true')\n", "os.system"),
        ("import os\nos.environ['X'] = '1'\n", "os.putenv"),
        ("import os\nos.chdir('/')\n", "os.chdir"),
        ("import os\nos.kill(os.getpid(), 0)\n", "os.kill"),
        ("import os\nos.symlink('/etc/hostname', 'link')\n", "os.symlink"),
        ("import urllib.request\n", "urllib.request"),
        ("import multiprocessing\n", "multiprocessing"),
    ):
        case.run(script)
        r = expect(case, "sandbox", [])
        check(word in r["error"], "%r: error names %s" % (script, word), case)


def _make_outside_step(case):
    path = os.path.join(case.sibling, "outside.step")
    plain_freecad("Part.makeBox(3, 3, 3).exportStep(%r)" % path)
    check(os.path.exists(path), "helper made the STEP")
    return path


def test_e_part_read_outside(case):
    path = _make_outside_step(case)
    case.run("result = Part.read(%r)\n" % path)
    r = expect(case, "sandbox", [])
    check("Part.read" in r["error"] and path in r["error"], "names API and path", case)


def test_e_other_freecad_file_apis(case):
    path = _make_outside_step(case)
    target = os.path.join(case.sibling, "written.step")
    scripts = [
        "s = Part.Shape()\ns.read(%r)\n" % path,
        "Part.makeBox(1, 1, 1).exportStep(%r)\n" % target,
        "Part.makeBox(1, 1, 1).Solids[0].exportBrep(%r)\n" % target,
        "object.__getattribute__(Part.makeBox(1, 1, 1), 'exportStep')(%r)\n" % target,
        "Part.Shape.__getattribute__(Part.makeBox(1, 1, 1), 'exportStep')(%r)\n" % target,
        "import sys\nsys.audit('v2c.getattr', Part.makeBox(1, 1, 1), 'exportStep', [])\n",
        "doc.saveAs(%r)\n" % os.path.join(case.sibling, "x.FCStd"),
        "doc.FileName = %r\ndoc.save()\n" % os.path.join(case.sibling, "y.FCStd"),
        "FreeCAD.openDocument(%r)\n" % path,
        "import Import\nImport.insert(%r, doc.Name)\n" % path,
        "import Mesh\nMesh.Mesh(%r)\n" % path,
        "f = doc.addObject('Part::ImportStep', 'Imp')\n",
        "FreeCAD.saveParameter()\n",
        "import importlib.util, _imp\n_imp.create_dynamic(importlib.util.find_spec('Part'))\n",
        "import sys\ndel sys.modules['Part']\nimport Part\n",
        "import importlib\nimportlib.import_module('ctypes')\n",
        "import gc\ngc.get_referrers(Part.read)\n",
        "import Mesh\nm = Mesh.Mesh()\nm.addFacets([(Vector(0,0,0), Vector(1,0,0), Vector(0,1,0))])\n"
        "m.write(Filename=%r)\n" % target,
        "f = doc.addObject('Part::FeaturePython', 'F')\nf.addProperty('App::PropertyFile', 'Src')\n"
        "f.Src = '/etc/hostname'\nresult = Part.makeBox(1, 1, 1)\n",
    ]
    for script in scripts:
        case.run(script)
        expect(case, "sandbox", [])
    check(not os.path.exists(target), "nothing was written outside")


def test_f_exception(case):
    case.run("x = 1\n\ndef f():\n    raise ValueError('x')\n\nf()\n")
    r = expect(case, "exception", [])
    check(r["error"].startswith("ValueError: x"), "type and message", case)
    check("line 4, in f" in r["error"] and "line 6, in <module>" in r["error"], "script traceback lines", case)


def test_f_freecad_exception_and_syntax(case):
    case.run("Part.makeBox(-1, 1, 1)\n")
    r = expect(case, "exception", [])
    check("line 1" in r["error"], "points at the line", case)
    case.run("result = Part.makeBox(1, 1\n")
    r = expect(case, "exception", [])
    check(r["error"].startswith("SyntaxError") and "line 1" in r["error"], "syntax error", case)


def test_g_no_solid(case):
    case.run("w = Part.makePolygon([Vector(0,0,0), Vector(1,0,0), Vector(1,1,0)])\nPart.show(w)\nresult = w\n")
    expect(case, "no_solid", [])
    case.run("print('nothing')\n")
    r = expect(case, "no_solid", [])
    check("the document is empty" in r["error"], "an empty document is named: %s" % r["error"], case)
    # A sketch whose constraints conflict: its pad builds nothing, and the outcome says which
    # feature is in which state instead of only "no solid".
    case.run("""
body = doc.addObject('PartDesign::Body', 'Body')
sk = body.newObject('Sketcher::SketchObject', 'S1')
sk.Support = ([f for f in body.Origin.OriginFeatures if f.Role == 'XY_Plane'][0], [''])
sk.MapMode = 'FlatFace'
sk.addGeometry(Part.LineSegment(Vector(0, 0, 0), Vector(10, 0, 0)))
sk.addConstraint(Sketcher.Constraint('DistanceX', 0, 1, 0, 2, 10))
sk.addConstraint(Sketcher.Constraint('DistanceX', 0, 1, 0, 2, 12))
pad = body.newObject('PartDesign::Pad', 'Pad')
pad.Profile = sk
pad.Length = 5
doc.recompute()
""")
    r = expect(case, "no_solid", [])
    check("S1 (Sketcher::SketchObject)" in r["error"] and "Pad (PartDesign::Pad)" in r["error"],
          "each feature's state is named: %s" % r["error"], case)


def test_h_write_in_out_dir(case):
    case.run("""
        with open(%r + '/note.txt', 'w') as f:
            f.write('hi')
        with open('relative.txt', 'w') as f:   # the working directory is out_dir
            f.write('rel')
        import os, tempfile
        os.mkdir('sub')
        with tempfile.NamedTemporaryFile(delete=False) as t:
            t.write(b'tmp')
        Part.makeBox(1, 1, 1).exportStep('sub/extra.step')
        result = Part.makeBox(2, 2, 2)
    """ % case.out)
    expect(case, "ok", BOTH)
    check(open(os.path.join(case.out, "note.txt")).read() == "hi", "note.txt written", case)
    check(os.path.exists(os.path.join(case.out, "relative.txt")), "relative.txt written", case)
    check(os.path.exists(os.path.join(case.out, "sub", "extra.step")), "relative exportStep", case)


def test_i_several_part_features(case):
    case.run("""
        box = doc.addObject('Part::Box', 'Box')
        cyl = doc.addObject('Part::Cylinder', 'Cyl')
        cyl.Placement.Base = Vector(100, 0, 0)
        doc.recompute()
    """)
    r = expect(case, "ok", BOTH)
    expected = 1000.0 + 3.141592653589793 * 2 * 2 * 10
    check(abs(r["volume"] - expected) < 1e-6 and r["solids"] == 2, "box + cylinder", case)
    check(r["parametric"] is True and r["result_object"] == "V2C_Result", "MultiFuse", case)
    out = plain_freecad(
        "d = FreeCAD.openDocument(%r); o = d.getObject('V2C_Result'); d.getObject('Box').Length = 20; d.recompute();"
        " print('R', o.TypeId, o.Shape.Volume)" % os.path.join(case.out, "model.FCStd")
    )
    line = [l for l in out.splitlines() if l.startswith("R ")][-1].split()
    check(line[1] == "Part::MultiFuse" and abs(float(line[2]) - (expected + 1000.0)) < 1e-6, "parametric: %s" % line)


def test_j_part_cut_single(case):
    case.run("""
        box = doc.addObject('Part::Box', 'Box')
        cyl = doc.addObject('Part::Cylinder', 'Cyl')
        cyl.Radius = 2
        cut = doc.addObject('Part::Cut', 'Cut')
        cut.Base, cut.Tool = box, cyl
        doc.recompute()
    """)
    r = expect(case, "ok", BOTH)
    expected = 1000.0 - 3.141592653589793 * 4 * 10 / 4
    check(abs(r["volume"] - expected) < 1e-6, "cut volume", case)
    check(r["parametric"] is True, "parametric compound of the cut", case)


def test_k_own_document_and_numpy(case):
    case.run("""
        import numpy as np
        d2 = FreeCAD.newDocument('Other')
        b = d2.addObject('Part::Box', 'B')
        b.Length = float(np.float64(5.0))
        d2.recompute()
    """)
    r = expect(case, "ok", BOTH)
    check(abs(r["volume"] - 500.0) < 1e-6 and r["document"] == "Other", "the other document", case)


def test_l_invalid_feature(case):
    case.run(PAD_SCRIPT + """
pad2 = body.newObject('PartDesign::Pad', 'Pad001')
pad2.Profile = sketch
pad2.Length = 0          # FreeCAD: "Length of pad too small"
doc.recompute()
""")
    r = expect(case, "invalid", [])
    check("Pad001" in r["error"] and "too small" in r["error"], "names the broken feature", case)


def test_m_memory(case):
    case.run("x = bytearray(8 * 1024 ** 3)\n", memory_mb=6144)
    expect(case, "memory", [])


def test_n_cpu_limit(case):
    case.run("while True:\n    pass\n", cpu_seconds=2)
    check(case.returncode in (-signal.SIGXCPU, -signal.SIGKILL), "killed by the CPU limit (rc %s)" % case.returncode, case)
    check(case.result is None and case.outputs() == [], "no result, no outputs", case)


def test_p_two_bodies(case):
    case.run(PAD_SCRIPT + """
body2 = doc.addObject('PartDesign::Body', 'Body001')
xy2 = [f for f in body2.Origin.OriginFeatures if f.Role == 'XY_Plane'][0]
sk2 = body2.newObject('Sketcher::SketchObject', 'Sketch001')
sk2.Support = (xy2, [''])
sk2.MapMode = 'FlatFace'
sk2.addGeometry(Part.Circle(Vector(50, 0, 0), Vector(0, 0, 1), 5), False)
p2 = body2.newObject('PartDesign::Pad', 'Pad001')
p2.Profile = sk2
p2.Length = 4
doc.recompute()
""")
    r = expect(case, "ok", BOTH)
    cyl = 3.141592653589793 * 25 * 4
    check(abs(r["volume"] - (2000 + cyl)) < 1e-6 and r["pads_pockets"] == 2, "two bodies", case)
    check(r["parametric"] and r["result_object"] == "V2C_Result", "a MultiFuse of the bodies", case)
    out = plain_freecad(
        "d = FreeCAD.openDocument(%r); d.getObject('Pad').Length = 11; d.recompute();"
        " print('R', d.getObject('V2C_Result').Shape.Volume)" % os.path.join(case.out, "model.FCStd")
    )
    line = [l for l in out.splitlines() if l.startswith("R ")][-1].split()
    check(abs(float(line[1]) - (2200 + cyl)) < 1e-6, "the MultiFuse follows the Pad: %s" % line)


def test_q_own_document_closed_model_and_stale_outputs(case):
    case.run("d = FreeCAD.newDocument('Mine')\nd.addObject('Part::Box', 'B')\nd.recompute()\n"
             "FreeCAD.closeDocument(doc.Name)\n")
    r = expect(case, "ok", BOTH)
    check(r["document"] == "Mine" and abs(r["volume"] - 1000.0) < 1e-6, "the script's own document", case)
    case.run("import sys\nsys.exit(3)\n")  # same out_dir: the earlier outputs must go
    r = expect(case, "exception", [])
    check(r["error"].startswith("SystemExit: 3"), "exit code reported", case)
    case.run("result = Part.makeBox(1, 1, 1)\nimport sys\nsys.exit(0)\n")
    expect(case, "ok", BOTH)


def test_o_freecad_python_modules(case):
    # FreeCAD's own Python modules (and numpy, which imports ctypes and sets an environment
    # variable when imported) must work without being reported as violations
    case.run("""
        import sys
        sys.path += ['/usr/share/freecad/Ext', '/usr/lib/freecad/Mod/Part', '/usr/lib/freecad/Mod/Draft']
        import numpy
        import BOPTools.SplitAPI
        import DraftGeomUtils, DraftVecUtils
        b = Part.makeBox(2, 2, 2)
        c = Part.makeCylinder(0.5, 4)
        result = BOPTools.SplitAPI.slice(b, [c], 'Standard')
    """)
    r = expect(case, "ok", BOTH)
    check(abs(r["volume"] - 8.0) < 1e-6, "volume of the split box", case)


TESTS = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_") and callable(fn)]


def main(argv):
    filters = argv[1:]
    failed = []
    for name, fn in TESTS:
        if filters and not any(f in name for f in filters):
            continue
        case = Case(name)
        try:
            fn(case)
            print("PASS", name, flush=True)
        except Exception:
            failed.append(name)
            print("FAIL", name, flush=True)
            traceback.print_exc()
        finally:
            case.cleanup()
    print("%d failed" % len(failed) if failed else "all passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
