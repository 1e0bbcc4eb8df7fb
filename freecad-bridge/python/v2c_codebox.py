"""Run one untrusted, model-written FreeCAD script and export what it built.

This is the *direct-code baseline* of vision2cad: a vision-language model writes a whole
FreeCAD Python script from an image; this module runs it in the current process and saves the
result as `model.step` and `model.FCStd` in the request's `out_dir`.

Entry point: `main(request_json: str) -> str` (JSON in, JSON out; it never raises). The process
is single use: the audit hook installed by `main` cannot be removed, and a second call is
refused. Run every script in a fresh child process.

Request:
    {"script": "<python source>", "out_dir": "/abs/dir (exists, writable)",
     "read_roots": ["/abs/dir", ...], "cpu_seconds": 120, "memory_mb": 6144,
     "file_mb": 2048 (optional, RLIMIT_FSIZE; 0 = unlimited)}

Response:
    {"ok": bool, "kind": "ok"|"exception"|"sandbox"|"no_solid"|"invalid"|"memory",
     "error": str, "solids": int, "volume": float, "valid": bool, "features": int,
     "pads_pockets": int, "parametric": bool, "result_object": str|null, "output": str,
     "document": str|null, "feature_errors": [str], "violations": [str], "unguarded": [str]}

THE AUDIT HOOK IS NOT A SECURITY BOUNDARY ON ITS OWN. It stops accidents and naive misuse
(a script that writes `shape.exportStep("/tmp/x.step")`, reads `/etc/...`, imports
`subprocess`) and lets us classify them as kind "sandbox". A determined script can get around
it: Python code can reach other frames' locals (`frame.f_back` raises no audit event) and so
the originals the hook keeps; FreeCAD's C++ reads and writes files without raising audit
events (the entry points we know of are wrapped, see `_FILE_APIS`, `_SHAPE_METHODS`,
`_DOCUMENT_METHODS`, `_MESH_METHODS`, but not all: ParameterGrp.Export/Import/Insert,
Spreadsheet importFile/exportFile, PropertyFile/PropertyFileIncluded values (only checked after
the script ran), OCC or Coin code reached some other way). The Rust parent must therefore also
confine the process (Linux Landlock for the file system, no network), close inherited file
descriptors and enforce a wall-clock limit. Note that FreeCAD itself writes under its user
cache directory (`doc.TransientDir`, ~/.cache/FreeCAD/Cache) from C++: give each run its own
HOME/XDG_CACHE_HOME and let Landlock allow it.

How the wrapping works: module functions (FreeCAD.openDocument, Part.read, ...) are replaced by
stand-ins that pass their arguments to the audit hook (`sys.audit("v2c.call", ...)`); the hook
checks the path and calls the original, which only its closure holds. Methods of FreeCAD's C++
types (Shape.exportStep, Document.saveAs, ...) cannot be replaced the ordinary way: the types
are immutable and FreeCAD's attribute lookup finds C++ methods before the type dict. So, before
the hook is sealed, ctypes clears Py_TPFLAGS_IMMUTABLETYPE for a moment and the guarded methods
and `__getattribute__` of these types and all their bases are replaced; the new
`__getattribute__` returns the guard for guarded names and asks the hook for everything else.
Failures there are reported in "unguarded".

Denials raise PermissionError("sandbox: <operation> <path or arguments> ...") and are recorded;
any recorded denial makes the run kind "sandbox", even if the script caught it. Exception: a
*library* importing a denied module gets an ImportError (numpy imports ctypes inside `try`),
which counts only if the script then fails. os.putenv/unsetenv are denied only when the
script calls them (numpy sets an environment variable on import).

What `main` does:
 1. imports FreeCAD, Part, Sketcher, PartDesign (+ Import, Mesh) and everything the export
    needs, creates `doc = FreeCAD.newDocument("Model")`, sets RLIMIT_CPU (hard = soft + 5 s),
    RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_CORE = 0, changes into out_dir;
 2. wraps FreeCAD's file entry points and installs the audit hook (see `_install_sandbox`);
 3. runs the script with stdout/stderr captured;
 4. finds the result: `result` in the script's namespace (a Part.Shape or a document object),
    else every PartDesign::Body with a solid plus every visible top-level Part feature with a
    solid that no other solid-producing feature consumes;
 5. adds `V2C_Result` (Part::MultiFuse of the result objects, Part::Compound for a single
    non-body object, Part::Feature holding the shape for `result = <shape>`; nothing for a
    single Body, whose name is then reported), saves model.step and model.FCStd.
Outputs are written only when ok is true. Steps 4 and 5 (and the response's shape) are in
`v2c_codebox_result.py`, a module of their own: loaded first (the Rust parent loads it as
`v2c_codebox_result` before this one; run standalone, it is found beside this file).
"""

import builtins
import glob
import io
import json
import linecache
import math
import os
import resource
import stat
import sys
import tempfile
import traceback
import types

from v2c_codebox_result import _collect_and_save, _remove_outputs, _response

FREECAD_PATHS = ("/usr/lib/freecad-python3/lib", "/usr/lib/freecad/Mod")
SCRIPT_NAME = "model_script.py"
OUTPUT_TAIL = 4000

# Modules a script may not import (also their submodules). Denied imports raise
# PermissionError("sandbox: ...") when the script itself imports them, and ImportError (not
# recorded as a violation) when a library imports them, so optional imports degrade: numpy,
# for one, imports ctypes inside `try: ... except ImportError`.
DENIED_IMPORTS = (
    "ctypes", "_ctypes", "subprocess", "_posixsubprocess", "socket", "_socket",
    "multiprocessing", "_multiprocessing", "_posixshmem", "pty", "urllib.request",
    "http.client", "ssl", "_ssl", "ftplib", "smtplib", "poplib", "imaplib", "nntplib",
    "telnetlib", "webbrowser", "_dbm", "_gdbm", "_xxsubinterpreters", "_xxinterpchannels",
    "_testcapi", "_testinternalcapi", "_testmultiphase", "_testsinglephase",
    # FreeCAD modules with file I/O in C++ that are not wrapped and not needed for modelling
    "Points", "Fem", "Path", "PathSimulator", "TechDraw", "Drawing", "Raytracing", "Robot",
    "Inspection", "ReverseEngineering", "Web", "Image", "Start",
)
# Audit events denied outright (exact names, then prefixes).
DENIED_EVENTS = (
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "os.kill", "os.killpg", "os.startfile",
    "os.chdir", "os.link", "os.symlink", "os.add_dll_directory", "resource.setrlimit",
    "resource.prlimit", "sys.addaudithook", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "fcntl.ioctl", "builtins.breakpoint", "webbrowser.open",
    "urllib.Request", "sqlite3.enable_load_extension", "sqlite3.load_extension",
    "cpython.PyInterpreterState_New",
)
DENIED_EVENT_PREFIXES = (
    "socket.", "ctypes.", "ftplib.", "smtplib.", "poplib.", "imaplib.", "nntplib.",
    "telnetlib.", "http.client.", "_winapi.", "winreg.", "msvcrt.",
)
# Document object types that read a file named in a property when recomputed.
FILE_OBJECT_TYPES = (
    "Part::ImportStep", "Part::ImportIges", "Part::ImportBrep", "Mesh::Import",
    "App::InventorObject", "App::VRMLObject", "App::DocumentObjectFileIncluded",
    "Points::ImportAscii",
)

# FreeCAD's file entry points: (module name, attribute, kind, path position, path keyword).
# kind: r = reads the path, w = writes it, deny = always denied.
_FILE_APIS = (
    ("FreeCAD", "open", "r", 0, None),
    ("FreeCAD", "openDocument", "r", 0, None),
    ("FreeCAD", "loadFile", "r", 0, None),
    ("FreeCAD", "insert", "r", 0, None),  # absent in 0.20 (FreeCADGui has it)
    ("FreeCAD", "saveParameter", "deny", None, None),
    ("Part", "open", "r", 0, None),
    ("Part", "insert", "r", 0, None),
    ("Part", "read", "r", 0, None),
    ("Part", "export", "w", 1, None),
    ("Import", "open", "r", 0, None),
    ("Import", "insert", "r", 0, None),
    ("Import", "export", "w", 1, None),
    ("Import", "readDXF", "r", 0, None),
    ("Import", "writeDXFShape", "w", 1, None),
    ("Import", "writeDXFObject", "w", 1, None),
    ("Mesh", "open", "r", 0, None),
    ("Mesh", "insert", "r", 0, None),
    ("Mesh", "read", "r", 0, None),
    ("Mesh", "export", "w", 1, None),
)
# Methods of FreeCAD's (immutable, C++) types: (type key, method, kind, path position counting
# self, keyword). FreeCAD resolves C++ methods before the type dict, so these are reached by
# replacing `__getattribute__` of the type and of its bases (see _install_sandbox).
_SHAPE_METHODS = (
    ("read", "r", 1, None), ("importBrep", "r", 1, None), ("importBinary", "r", 1, None),
    ("exportStep", "w", 1, None), ("exportIges", "w", 1, None), ("exportBrep", "w", 1, None),
    ("exportStl", "w", 1, None), ("exportBinary", "w", 1, None),
)
_DOCUMENT_METHODS = (
    ("save", "doc_w", None, None), ("restore", "doc_r", None, None),
    ("saveAs", "w", 1, None), ("saveCopy", "w", 1, None), ("load", "r", 1, None),
    ("mergeProject", "r", 1, None), ("exportGraphviz", "w", 1, None),
    ("addObject", "addobj", 1, None),
)
_MESH_METHODS = (
    ("read", "r", 1, "Filename"), ("write", "w", 1, "Filename"), ("__init__", "r", 1, None),
)
_TP_FLAGS_OFFSET = 21 * 8  # offsetof(PyTypeObject, tp_flags) on 64-bit CPython 3.8 - 3.12
_TPFLAGS_IMMUTABLETYPE = 1 << 8

_USED = False


# ---------------------------------------------------------------------------- entry point


def main(request_json):
    global _USED
    try:
        if _USED:
            return json.dumps(_response("exception", "internal: the codebox runs one script per process"))
        _USED = True
        return json.dumps(_run(request_json))
    except BaseException as exc:  # noqa: BLE001  never raise out of main
        try:
            return json.dumps(_response("exception", "internal: %s: %s" % (type(exc).__name__, exc)))
        except BaseException:
            return '{"ok": false, "kind": "exception", "error": "internal error"}'


def _parse_request(request_json):
    req = json.loads(request_json)
    if not isinstance(req, dict):
        raise ValueError("the request must be a JSON object")
    script = req.get("script")
    if not isinstance(script, str):
        raise ValueError("script must be a string")
    out_dir = req.get("out_dir")
    if not isinstance(out_dir, str) or not os.path.isabs(out_dir) or not os.path.isdir(out_dir):
        raise ValueError("out_dir must be an existing absolute directory")
    roots = req.get("read_roots") or []
    if not isinstance(roots, list) or not all(isinstance(r, str) and os.path.isabs(r) for r in roots):
        raise ValueError("read_roots must be a list of absolute paths")

    def number(name, default):
        v = req.get(name, default)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError("%s must be a non-negative number" % name)
        return v

    return {
        "script": script,
        "out_dir": os.path.realpath(out_dir),
        "read_roots": roots,
        "cpu_seconds": number("cpu_seconds", 120),
        "memory_mb": number("memory_mb", 6144),
        "file_mb": number("file_mb", 2048),
    }


def _run(request_json):
    try:
        req = _parse_request(request_json)
    except Exception as exc:
        return _response("exception", "bad request: %s" % exc)

    # 1. everything the run needs, before the sandbox goes up
    for p in FREECAD_PATHS:
        if p not in sys.path and os.path.isdir(p):
            sys.path.append(p)
    try:
        import FreeCAD
        import Part
        import Sketcher
        import PartDesign
    except Exception as exc:
        return _response("exception", "internal: cannot import FreeCAD: %s" % exc)
    modules = {"FreeCAD": FreeCAD, "Part": Part, "Sketcher": Sketcher, "PartDesign": PartDesign}
    for name in ("Import", "Mesh"):
        try:
            modules[name] = __import__(name)
        except Exception:
            pass

    doc = FreeCAD.newDocument("Model")
    doc_name = doc.Name
    _set_limits(req)
    out_dir = req["out_dir"]
    _remove_outputs(out_dir)  # a failed run must not leave an earlier run's files behind
    os.chdir(out_dir)
    sys.dont_write_bytecode = True
    tempfile.tempdir = out_dir

    # 2. the sandbox
    unguarded = []
    _install_sandbox(out_dir, req["read_roots"], modules, unguarded)

    # 3. run the script
    script = req["script"]
    linecache.cache[SCRIPT_NAME] = (len(script), None, script.splitlines(True), SCRIPT_NAME)
    namespace = {
        "__name__": "__main__",
        "__builtins__": dict(builtins.__dict__),
        "FreeCAD": FreeCAD,
        "App": FreeCAD,
        "Part": Part,
        "Sketcher": Sketcher,
        "PartDesign": PartDesign,
        "Base": FreeCAD.Base,
        "Vector": FreeCAD.Vector,
        "doc": doc,
        "math": math,
    }
    captured = io.StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = captured
    try:
        resp = _execute_and_collect(script, namespace, doc_name, out_dir, modules)
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    violations = _violations()
    if violations:
        _remove_outputs(out_dir)
        resp = _response("sandbox", violations[0], violations=violations[:20])
    resp["output"] = captured.getvalue()[-OUTPUT_TAIL:]
    resp["unguarded"] = unguarded
    return resp


def _set_limits(req):
    cpu = req["cpu_seconds"]
    if cpu > 0:
        soft = max(1, int(math.ceil(cpu)))
        hard_now = resource.getrlimit(resource.RLIMIT_CPU)[1]
        hard = soft + 5
        if hard_now != resource.RLIM_INFINITY:
            hard = min(hard, hard_now)
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    for limit, mb in ((resource.RLIMIT_AS, req["memory_mb"]), (resource.RLIMIT_FSIZE, req["file_mb"])):
        if mb > 0:
            value = int(mb) << 20
            hard_now = resource.getrlimit(limit)[1]
            if hard_now != resource.RLIM_INFINITY:
                value = min(value, hard_now)
            resource.setrlimit(limit, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _violations(including_soft=False):
    """The sandbox denials so far (with soft ones: a library's refused import, which only
    counts when the script failed)."""
    box = []
    sys.audit("v2c.violations", box, including_soft)
    return box


# ---------------------------------------------------------------------------- running


def _execute_and_collect(script, namespace, doc_name, out_dir, modules):
    try:
        code = compile(script, SCRIPT_NAME, "exec")
    except SyntaxError as exc:
        text = (exc.text or "").rstrip()
        msg = "SyntaxError: %s (%s, line %s)" % (exc.msg, SCRIPT_NAME, exc.lineno)
        if text:
            msg += "\n    " + text.strip()
        return _response("exception", msg)
    except (ValueError, MemoryError) as exc:
        kind = "memory" if isinstance(exc, MemoryError) else "exception"
        return _response(kind, "%s: %s" % (type(exc).__name__, exc))

    try:
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            return _response("exception", "SystemExit: %s%s" % (exc.code, _script_traceback(exc)))
    except BaseException as exc:  # noqa: BLE001  report whatever the script raised
        denied = _violations(including_soft=True)
        if denied:
            return _response("sandbox", denied[0], violations=denied[:20])
        if _is_memory_error(exc):
            return _response("memory", "%s: %s" % (type(exc).__name__, _exception_text(exc)))
        return _response(
            "exception", "%s: %s%s" % (type(exc).__name__, _exception_text(exc), _script_traceback(exc))
        )
    if _violations():
        return _response("sandbox", "")
    try:
        return _collect_and_save(namespace, doc_name, out_dir, modules)
    except BaseException as exc:  # noqa: BLE001
        _remove_outputs(out_dir)
        if _is_memory_error(exc):
            return _response("memory", "%s: %s" % (type(exc).__name__, _exception_text(exc)))
        if isinstance(exc, PermissionError) and str(exc).startswith("sandbox: "):
            return _response("sandbox", str(exc))
        return _response(
            "exception",
            "while collecting the result: %s: %s%s"
            % (type(exc).__name__, _exception_text(exc), _script_traceback(exc)),
        )


def _exception_text(exc):
    """FreeCAD raises exceptions whose argument is a dict with the message inside."""
    try:
        arg = exc.args[0] if exc.args else None
        if isinstance(arg, dict):
            return str(arg.get("sErrMsg") or arg.get("swhat") or arg)
        return str(exc) or type(exc).__name__
    except BaseException:
        return type(exc).__name__


def _is_memory_error(exc):
    if isinstance(exc, MemoryError):
        return True
    text = _exception_text(exc)
    return any(s in text for s in ("bad_alloc", "OutOfMemory", "Out of memory", "out of memory"))


def _script_traceback(exc):
    """The traceback lines that point into the script, so that a model could fix it."""
    lines = []
    try:
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            code = frame.f_code
            if code.co_filename != SCRIPT_NAME:
                continue
            source = linecache.getline(SCRIPT_NAME, lineno).strip()
            entry = "  line %d, in %s" % (lineno, code.co_name)
            if source:
                entry += "\n    " + source
            lines.append(entry)
    except BaseException:
        pass
    if not lines:
        return ""
    return "\nTraceback (%s, most recent call last):\n%s" % (SCRIPT_NAME, "\n".join(lines[-10:]))


# ---------------------------------------------------------------------------- the sandbox


def _make_wrapper(key, name, doc, audit):
    """A stand-in for a FreeCAD file API: the audit hook checks the path and calls the original,
    which only the hook can reach."""

    def wrapper(*args, **kwargs):
        box = []
        audit("v2c.call", key, args, kwargs, box)
        return box[0] if box else None

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = doc
    return wrapper


def _make_getattribute(table, audit, method_type, mro_of, type_of):
    """`__getattribute__` for FreeCAD types with guarded methods: the guard for those, else the
    original C++ lookup, which only the audit hook can reach."""
    cache = {}
    backwards = reversed

    def __getattribute__(self, name):
        tp = type_of(self)
        guards = cache.get(tp)
        if guards is None:
            guards = {}
            for t in backwards(mro_of(tp)):
                guards.update(table.get(t, {}))
            cache[tp] = guards
        guard = guards.get(name)
        if guard is not None:
            return method_type(guard, self)
        box = []
        audit("v2c.getattr", self, name, box)
        return box[0]

    return __getattribute__


def _set_type_attr(tp, name, value, ctypes):
    """setattr on a static (immutable) extension type: clear Py_TPFLAGS_IMMUTABLETYPE around it."""
    flags = ctypes.c_ulong.from_address(id(tp) + _TP_FLAGS_OFFSET)
    if flags.value != tp.__flags__:
        raise RuntimeError("unexpected PyTypeObject layout")
    immutable = flags.value & _TPFLAGS_IMMUTABLETYPE
    flags.value = flags.value & ~_TPFLAGS_IMMUTABLETYPE
    try:
        setattr(tp, name, value)
    finally:
        if immutable:
            flags.value = flags.value | _TPFLAGS_IMMUTABLETYPE


def _library_roots(extra):
    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    roots += [p for p in sys.path if isinstance(p, str) and os.path.isabs(p)]
    for pattern in ("/usr/lib/freecad*", "/usr/share/freecad*", "/usr/lib/python3*",
                    "/usr/local/lib/python3*", "/usr/share/python3*"):
        roots += glob.glob(pattern)
    here = globals().get("__file__")
    if here:
        roots.append(os.path.dirname(os.path.abspath(here)))
    if sys.executable:
        roots.append(sys.executable)
    roots += list(extra)
    out = []
    for r in roots:
        for candidate in (os.path.normpath(r), os.path.realpath(r)):
            if candidate not in out:
                out.append(candidate)
    return tuple(out)


def _install_sandbox(out_dir, read_roots, modules, unguarded):
    """Wrap FreeCAD's file APIs and install the audit hook. Everything the hook uses is bound
    here, in a scope that no function the script can reach shares."""
    import ctypes

    FreeCAD, Part = modules["FreeCAD"], modules["Part"]
    Mesh = modules.get("Mesh")

    # captured builtins and C functions: the hook never looks a name up in a module
    _type, _isinstance, _len, _str, _bytes, _int, _tuple, _list, _dict, _set = (
        type, isinstance, len, str, bytes, int, tuple, list, dict, set)
    _PermissionError, _ImportError, _TypeError, _AttributeError, _OSError = (
        PermissionError, ImportError, TypeError, AttributeError, OSError)
    _slice_all, _repr = slice(None), repr
    _str_copy, _bytes_copy = str.__getitem__, bytes.__getitem__
    _fspath, _fsdecode = os.fspath, os.fsdecode
    _realpath, _normpath, _isabs, _join = os.path.realpath, os.path.normpath, os.path.isabs, os.path.join
    _getcwd, _readlink, _stat, _S_ISDIR = os.getcwd, os.readlink, os.stat, stat.S_ISDIR
    _getframe = sys._getframe
    _mro_of = type.__dict__["__mro__"].__get__
    _Namespace = types.SimpleNamespace
    _bool, _getattr, _script_name = bool, getattr, SCRIPT_NAME
    _os_files = (os.__file__, "<frozen os>")
    import importlib
    _importlib_files = (importlib.__file__,)
    _write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    _self_file = _install_sandbox.__code__.co_filename

    out_root = os.path.realpath(out_dir)
    write_roots = (out_root,)
    read_all = _library_roots(read_roots) + (out_root,)
    denied_events = frozenset(DENIED_EVENTS)
    denied_prefixes = tuple(DENIED_EVENT_PREFIXES)
    denied_imports = tuple(DENIED_IMPORTS)
    file_types = frozenset(FILE_OBJECT_TYPES)
    violations = []
    soft = []  # denials that only count if the script fails
    sealed = [False]

    # ------------------------------------------------------------ the originals
    specs = []  # key -> (label, original, kind, position, keyword)
    protected_modules = set()

    def spec(label, original, kind, pos, kw):
        specs.append((label, original, kind, pos, kw))
        return _len(specs) - 1

    audit = sys.audit
    for mod_name, attr, kind, pos, kw in _FILE_APIS:
        mod = modules.get(mod_name)
        if mod is None:
            continue
        original = getattr(mod, attr, None)
        if original is None:
            continue
        key = spec("%s.%s" % (mod_name, attr), original, kind, pos, kw)
        try:
            setattr(mod, attr, _make_wrapper(key, attr, getattr(original, "__doc__", None), audit))
        except Exception as exc:
            unguarded.append("%s.%s (%s)" % (mod_name, attr, exc))
    for name in modules:
        protected_modules.add(name)
    protected_modules.update(("_PartDesign", "__FreeCADBase__"))

    import _imp
    create_dynamic = _imp.create_dynamic
    key = spec("_imp.create_dynamic", create_dynamic, "dyn", 0, None)
    _imp.create_dynamic = _make_wrapper(key, "create_dynamic", create_dynamic.__doc__, audit)

    # FreeCAD types: guarded methods, and the original __getattribute__ of every type in their MROs
    def subclasses(tp):
        out = [tp]
        for s in tp.__subclasses__():
            out += subclasses(s)
        return out

    typed = [(Part.Shape, _SHAPE_METHODS), (FreeCAD.Document, _DOCUMENT_METHODS)]
    if Mesh is not None and hasattr(Mesh, "Mesh"):
        typed.append((Mesh.Mesh, _MESH_METHODS))
    table = {}  # type -> {name: wrapper}   (what the stand-in __getattribute__ returns)
    guarded = {}  # type -> frozenset(names) (what the hook refuses to look up the old way)
    patch_types = []
    for tp, methods in typed:
        entries = {}
        for name, kind, pos, kw in methods:
            original = tp.__dict__.get(name)
            if original is None:
                continue
            key = spec("%s.%s" % (tp.__name__, name), original, kind, pos, kw)
            entries[name] = _make_wrapper(key, name, getattr(original, "__doc__", None), audit)
        table[tp] = entries
        guarded[tp] = frozenset(entries)
        for sub in subclasses(tp):
            for base in sub.__mro__:
                if base is not object and base not in patch_types:
                    patch_types.append(base)
    original_getattribute = {}
    for tp in patch_types:
        ga = tp.__dict__.get("__getattribute__")
        if ga is not None:
            original_getattribute[tp] = ga
    guard_cache = {}
    getattribute = _make_getattribute(table, audit, types.MethodType, _mro_of, type)

    # ------------------------------------------------------------ path checks

    def deny(op, detail, record=True):
        msg = "sandbox: %s %s" % (op, detail)
        if record:
            violations.append(msg)
        raise _PermissionError(msg)

    def as_text(value):
        """The exact str a C function will see for a path argument, or None."""
        t = _type(value)
        if t is _str:
            return value
        if _isinstance(value, _str):
            return _str_copy(value, _slice_all)
        if _isinstance(value, _bytes):
            return _fsdecode(_bytes_copy(value, _slice_all))
        try:
            value = _fspath(value)
        except _TypeError:
            return None
        return as_text(value) if _type(value) in (_str, _bytes) else None

    def under(path, roots):
        for root in roots:
            if path == root:
                return True
            if path.startswith(root if root.endswith("/") else root + "/"):
                return True
        return False

    def resolve(op, text):
        if "\x00" in text:
            deny(op, "%r (NUL in path)" % text)
        if not _isabs(text):
            norm = _normpath(text)
            if norm == ".." or norm.startswith("../"):
                deny(op, "%r (relative path leaves the working directory)" % text)
            text = _join(_getcwd(), text)
        return _realpath(text)

    def fd_target(fd):
        try:
            return _readlink("/proc/self/fd/%d" % fd)
        except _OSError:
            return None

    def check(op, value, write, directory_rule=False):
        """Deny (raise) unless `value` may be read (or written); return the checked text."""
        if _type(value) is _int or _type(value) is _bool:
            if 0 <= value <= 2:
                return value
            target = fd_target(value)
            roots = write_roots if write else read_all
            if target and target.startswith("/") and under(_realpath(target), roots):
                return value
            deny(op, "file descriptor %d (%s)" % (value, target or "unknown"))
        if value is None:
            value = "."
        text = as_text(value)
        if text is None:
            deny(op, "%s (unsupported path type %s)" % (_repr(value)[:100], _type(value).__name__))
        real = resolve(op, text)
        if write:
            if not under(real, write_roots):
                deny(op, "%r (writing is only allowed under the output directory)" % text)
        else:
            if not under(real, read_all):
                deny(op, "%r (outside the readable directories)" % text)
            if directory_rule and not under(real, write_roots):
                try:
                    is_dir = _S_ISDIR(_stat(real).st_mode)
                except _OSError:
                    is_dir = False
                if is_dir:
                    deny(op, "%r (opening a directory outside the output directory)" % text)
        return text

    # ------------------------------------------------------------ event handlers

    def on_open(args):
        path, mode, flags = (args + (None, None, None))[:3]
        write = False
        if _type(mode) is _str:
            for c in "wax+":
                if c in mode:
                    write = True
        if _type(flags) is _int and flags & _write_flags:
            write = True
        op = "open(%s)" % ("write" if write else "read")
        check(op, path, write, directory_rule=mode is None)

    def on_read(event):
        def handler(args):
            check(event, args[0] if args else None, False)
        return handler

    def on_write(event, count=1):
        def handler(args):
            for value in args[:count]:
                check(event, value, True)
        return handler

    def on_copy(event):
        def handler(args):
            check(event, args[0], False)
            check(event, args[1], True)
        return handler

    def on_glob(args):
        pattern = as_text(args[0]) if args else None
        if pattern is None:
            deny("glob.glob", "%s (unsupported pattern)" % _repr(args[:1]))
        root = args[2] if _len(args) > 2 else None
        if root is not None:
            root_text = as_text(root)
            if root_text is None:
                deny("glob.glob", "root_dir %r" % (root,))
            pattern = _join(root_text, pattern)
        static = []
        for part in pattern.split("/"):
            if "*" in part or "?" in part or "[" in part:
                break
            static.append(part)
        prefix = "/".join(static) or ("/" if pattern.startswith("/") else ".")
        check("glob.glob", prefix, False)

    def on_make_archive(args):
        check("shutil.make_archive", args[0], True)
        if _len(args) > 2 and args[2] is not None:
            check("shutil.make_archive", args[2], False)

    def on_unpack_archive(args):
        check("shutil.unpack_archive", args[0], False)
        if _len(args) > 1 and args[1] is not None:
            check("shutil.unpack_archive", args[1], True)

    def on_sqlite(args):
        target = args[0] if args else None
        if as_text(target) == ":memory:":
            return
        check("sqlite3.connect", target, True)

    def called_by_script(skip=()):
        """Whether the nearest caller outside the import system (and `skip`) is the script."""
        frame = _getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if (name == _self_file or name.startswith("<frozen importlib") or name in skip
                    or name in _importlib_files):
                frame = frame.f_back
                continue
            return name == _script_name
        return False

    def on_environ(event):
        def handler(args):
            # os.environ[...] = ... calls putenv: deny it for the script, not for libraries
            # (numpy sets OPENBLAS_MAIN_FREE when imported)
            if called_by_script(_os_files):
                deny(event, _repr(args)[:200])
        return handler

    def on_import(args):
        name = args[0] if args else None
        if _type(name) is not _str:
            name = as_text(name) or ""
        for denied in denied_imports:
            if name == denied or name.startswith(denied + "."):
                break
        else:
            if name in protected_modules:
                deny("import", "of %r again (FreeCAD modules are already loaded)" % name)
            return
        msg = "sandbox: import of module %r is not allowed" % name
        if called_by_script():
            deny("import", "of module %r is not allowed" % name)
        # a library's import: an ImportError, so that optional imports degrade; it counts as a
        # violation only if the script then fails
        soft.append(msg)
        raise _ImportError(msg, name=name)

    def guarded_names(tp):
        names = guard_cache.get(tp)
        if names is None:
            names = _set()
            for t in _mro_of(tp):
                names.update(guarded.get(t, ()))
            guard_cache[tp] = names
        return names

    def on_getattr(args):
        if _len(args) != 3 or _type(args[2]) is not _list:
            raise _TypeError("v2c.getattr: bad arguments")
        obj, name, box = args
        if _type(name) is not _str:
            name = as_text(name)
            if name is None:
                raise _TypeError("attribute name must be a string")
        tp = _type(obj)
        if name in guarded_names(tp):
            deny("getattr", "%s.%s through the original lookup" % (tp.__name__, name))
        for t in _mro_of(tp):
            original = original_getattribute.get(t)
            if original is not None:
                box.append(original(obj, name))
                return
        raise _AttributeError(name)

    def path_argument(args, kwargs, pos, kw):
        if kw is not None and kw in kwargs:
            return ("kw", kw, kwargs[kw])
        if pos is not None and pos < _len(args):
            return ("pos", pos, args[pos])
        return None

    def on_call(args):
        if (_len(args) != 4 or _type(args[0]) is not _int or _type(args[1]) is not _tuple
                or _type(args[2]) is not _dict or _type(args[3]) is not _list):
            raise _TypeError("v2c.call: bad arguments")
        key, call_args, call_kwargs, box = args
        if not 0 <= key < _len(specs):
            raise _TypeError("v2c.call: bad key")
        label, original, kind, pos, kw = specs[key]
        call_args, call_kwargs = _list(call_args), _dict(call_kwargs)
        if kind == "deny":
            deny(label, "is not allowed")
        elif kind in ("r", "w"):
            found = path_argument(call_args, call_kwargs, pos, kw)
            if found is not None:
                where, index, value = found
                text = as_text(value)
                if text is not None:  # file objects etc. pass: Python's open was checked
                    text = check("%s()" % label, text, kind == "w")
                    if where == "kw":
                        call_kwargs[index] = text
                    else:
                        call_args[index] = text
        elif kind in ("doc_r", "doc_w"):
            if not call_args:
                raise _TypeError("%s needs a document" % label)
            ga = original_getattribute.get(FreeCAD.Document)
            file_name = ga(call_args[0], "FileName") if ga is not None else ""
            if not file_name:
                deny(label, "of a document without a file name")
            check("%s()" % label, file_name, kind == "doc_w")
        elif kind == "addobj":
            found = path_argument(call_args, call_kwargs, pos, "type")
            if found is not None:
                where, index, value = found
                text = as_text(value)
                if text is not None:
                    if text in file_types:
                        deny(label, "of type %r (it reads a file)" % text)
                    if where == "kw":
                        call_kwargs[index] = text
                    else:
                        call_args[index] = text
        elif kind == "dyn":
            if not call_args:
                raise _TypeError("create_dynamic needs a spec")
            module_spec = call_args[0]
            name = as_text(_getattr(module_spec, "name", None))
            origin = as_text(_getattr(module_spec, "origin", None))
            if name is None or origin is None:
                raise _TypeError("create_dynamic: bad spec")
            if name in protected_modules:
                deny("import", "of %r again (FreeCAD modules are already loaded)" % name)
            check("load extension", origin, False)
            call_args[0] = _Namespace(name=name, origin=origin)
        box.append(original(*call_args, **call_kwargs))

    handlers = {
        "open": on_open,
        "os.listdir": on_read("os.listdir"),
        "os.scandir": on_read("os.scandir"),
        "os.getxattr": on_read("os.getxattr"),
        "os.listxattr": on_read("os.listxattr"),
        "glob.glob": on_glob,
        "glob.glob/2": on_glob,
        "os.remove": on_write("os.remove"),
        "os.rmdir": on_write("os.rmdir"),
        "os.mkdir": on_write("os.mkdir"),
        "os.rename": on_write("os.rename", 2),
        "os.truncate": on_write("os.truncate"),
        "os.chmod": on_write("os.chmod"),
        "os.chown": on_write("os.chown"),
        "os.utime": on_write("os.utime"),
        "os.chflags": on_write("os.chflags"),
        "os.lchflags": on_write("os.lchflags"),
        "os.setxattr": on_write("os.setxattr"),
        "os.removexattr": on_write("os.removexattr"),
        "shutil.copyfile": on_copy("shutil.copyfile"),
        "shutil.copymode": on_copy("shutil.copymode"),
        "shutil.copystat": on_copy("shutil.copystat"),
        "shutil.copytree": on_copy("shutil.copytree"),
        "shutil.move": on_write("shutil.move", 2),
        "shutil.rmtree": on_write("shutil.rmtree"),
        "shutil.chown": on_write("shutil.chown"),
        "shutil.make_archive": on_make_archive,
        "shutil.unpack_archive": on_unpack_archive,
        "tempfile.mkstemp": on_write("tempfile.mkstemp"),
        "tempfile.mkdtemp": on_write("tempfile.mkdtemp"),
        "sqlite3.connect": on_sqlite,
        "sqlite3.connect/handle": lambda args: None,
        "import": on_import,
        "os.putenv": on_environ("os.putenv"),
        "os.unsetenv": on_environ("os.unsetenv"),
    }

    fast_allow = frozenset((
        "object.__getattr__", "object.__setattr__", "object.__delattr__", "compile", "exec",
        "sys._getframe", "code.__new__", "function.__new__", "builtins.id", "marshal.loads",
        "sys.excepthook", "sys.unraisablehook", "os.walk", "os.fwalk",
    ))

    def hook(event, args):
        if event == "v2c.getattr":
            on_getattr(args)
            return
        if event == "v2c.call":
            on_call(args)
            return
        if event == "v2c.violations":
            if args and _type(args[0]) is _list:
                args[0].extend(violations)
                if _len(args) > 1 and args[1] is True:
                    args[0].extend(soft)
            return
        if event == "v2c.seal":
            sealed[0] = True
            return
        if not sealed[0] or event in fast_allow:
            return
        handler = handlers.get(event)
        if handler is not None:
            handler(args)
            return
        if event in denied_events:
            deny(event, _repr(args)[:200])
        for prefix in denied_prefixes:
            if event.startswith(prefix):
                deny(event, _repr(args)[:200])

    sys.addaudithook(hook)

    # the FreeCAD types: guarded methods in the type dicts (for object.__getattribute__), and
    # the stand-in __getattribute__ (FreeCAD's own lookup finds C++ methods first)
    for tp, entries in table.items():
        for name, wrapper in entries.items():
            try:
                _set_type_attr(tp, name, wrapper, ctypes)
            except Exception as exc:
                unguarded.append("%s.%s (%s)" % (tp.__name__, name, exc))
    for tp in original_getattribute:
        try:
            _set_type_attr(tp, "__getattribute__", getattribute, ctypes)
        except Exception as exc:
            unguarded.append("%s.__getattribute__ (%s): methods of %s are not guarded" % (tp.__name__, exc, tp.__name__))
    # the script must import ctypes itself (and be refused) to use it
    for name in [m for m in sys.modules if m == "ctypes" or m.startswith("ctypes.") or m == "_ctypes"]:
        del sys.modules[name]
    del ctypes
    sys.audit("v2c.seal")


# ---------------------------------------------------------------------------- standalone use

if __name__ == "__main__":
    for _p in FREECAD_PATHS:
        if _p not in sys.path:
            sys.path.append(_p)
    with open(sys.argv[1]) as _f:
        _request = _f.read()
    _result = main(_request)
    sys.stdout.flush()
    print(_result, flush=True)
