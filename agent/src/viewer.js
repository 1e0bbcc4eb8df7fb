// The report's 3D view: reads the model's GLB (embedded in the page as base64, so the page
// works offline and from file://) and draws it with WebGL. Drag to turn, wheel to zoom,
// double-click to reset. Only what vision2cad writes is read: one mesh, float positions and
// normals, uint32 indices, triangles (mode 4) and lines (mode 1).
(function () {
  "use strict";
  var canvas = document.getElementById("model3d");
  var source = document.getElementById("model3d-glb");
  if (!canvas || !source) return;
  var gl = canvas.getContext("webgl");
  var note = document.getElementById("model3d-note");
  if (!gl) { if (note) note.textContent = "This browser has no WebGL: open model.glb in a 3D viewer."; return; }
  gl.getExtension("OES_element_index_uint");

  var raw = atob(source.textContent.trim());
  var bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  var data = new DataView(bytes.buffer);
  var jsonLength = data.getUint32(12, true);
  var doc = JSON.parse(new TextDecoder().decode(bytes.subarray(20, 20 + jsonLength)));
  var binStart = 20 + jsonLength + 8;

  function accessor(k) {
    var a = doc.accessors[k], v = doc.bufferViews[a.bufferView];
    var start = binStart + (v.byteOffset || 0);
    var size = a.type === "VEC3" ? 3 : 1;
    var slice = bytes.buffer.slice(start, start + a.count * size * 4);
    return a.componentType === 5126 ? new Float32Array(slice) : new Uint32Array(slice);
  }

  function shader(type, text) {
    var s = gl.createShader(type);
    gl.shaderSource(s, text);
    gl.compileShader(s);
    return s;
  }
  var program = gl.createProgram();
  gl.attachShader(program, shader(gl.VERTEX_SHADER,
    "attribute vec3 p; attribute vec3 n; uniform mat4 mvp; uniform mat3 rot; varying float light;" +
    "void main(){ gl_Position = mvp * vec4(p, 1.0); light = abs((rot * n).z); }"));
  gl.attachShader(program, shader(gl.FRAGMENT_SHADER,
    "precision mediump float; varying float light; uniform vec3 color; uniform float lit;" +
    "void main(){ gl_FragColor = vec4(color * mix(1.0, 0.35 + 0.65 * light, lit), 1.0); }"));
  gl.linkProgram(program);
  gl.useProgram(program);
  var loc = {
    p: gl.getAttribLocation(program, "p"), n: gl.getAttribLocation(program, "n"),
    mvp: gl.getUniformLocation(program, "mvp"), rot: gl.getUniformLocation(program, "rot"),
    color: gl.getUniformLocation(program, "color"), lit: gl.getUniformLocation(program, "lit")
  };

  function buffer(target, array) {
    var b = gl.createBuffer();
    gl.bindBuffer(target, b);
    gl.bufferData(target, array, gl.STATIC_DRAW);
    return b;
  }
  var parts = [], lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  doc.meshes[0].primitives.forEach(function (prim) {
    var pos = accessor(prim.attributes.POSITION);
    for (var i = 0; i < pos.length; i++) { var k = i % 3; lo[k] = Math.min(lo[k], pos[i]); hi[k] = Math.max(hi[k], pos[i]); }
    var normals = prim.attributes.NORMAL !== undefined ? buffer(gl.ARRAY_BUFFER, accessor(prim.attributes.NORMAL)) : null;
    var indices = accessor(prim.indices);
    parts.push({
      positions: buffer(gl.ARRAY_BUFFER, pos), normals: normals,
      indices: buffer(gl.ELEMENT_ARRAY_BUFFER, indices), count: indices.length, mode: prim.mode,
      color: doc.materials[prim.material].pbrMetallicRoughness.baseColorFactor.slice(0, 3)
    });
  });
  var center = [0, 1, 2].map(function (k) { return (lo[k] + hi[k]) / 2; });
  var radius = Math.max(1e-9, Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]) / 2);

  // The view the loop's pictures use: from (1, -1, 1), Z up.
  var home = { yaw: Math.PI / 4, pitch: Math.atan(1 / Math.SQRT2), zoom: 1 };
  var view = { yaw: home.yaw, pitch: home.pitch, zoom: home.zoom };

  function multiply(a, b) {
    var out = new Float32Array(16);
    for (var r = 0; r < 4; r++) for (var c = 0; c < 4; c++) {
      var s = 0;
      for (var k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
      out[c * 4 + r] = s;
    }
    return out;
  }
  function draw() {
    var w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    gl.viewport(0, 0, w, h);
    gl.clearColor(1, 1, 1, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    // Model to camera: Z up turned about Z by yaw, then tilted by pitch; the camera looks
    // down -z (orthographic).
    var cy = Math.cos(view.yaw), sy = Math.sin(view.yaw), cp = Math.cos(view.pitch), sp = Math.sin(view.pitch);
    var rot = [cy, -sy * sp, sy * cp, sy, cy * sp, -cy * cp, 0, cp, sp]; // columns: model X, Y, Z in camera space
    var s = view.zoom / radius, aspect = w / Math.max(1, h);
    var model = new Float32Array([
      rot[0], rot[1], rot[2], 0, rot[3], rot[4], rot[5], 0, rot[6], rot[7], rot[8], 0,
      -(rot[0] * center[0] + rot[3] * center[1] + rot[6] * center[2]),
      -(rot[1] * center[0] + rot[4] * center[1] + rot[7] * center[2]),
      -(rot[2] * center[0] + rot[5] * center[1] + rot[8] * center[2]), 1]);
    var projection = new Float32Array([s * 0.9 / Math.max(aspect, 1), 0, 0, 0, 0, s * 0.9 * Math.min(aspect, 1), 0, 0, 0, 0, -0.5 / radius, 0, 0, 0, 0, 1]);
    gl.uniformMatrix4fv(loc.mvp, false, multiply(projection, model));
    gl.uniformMatrix3fv(loc.rot, false, new Float32Array(rot));
    parts.forEach(function (part) {
      gl.bindBuffer(gl.ARRAY_BUFFER, part.positions);
      gl.enableVertexAttribArray(loc.p);
      gl.vertexAttribPointer(loc.p, 3, gl.FLOAT, false, 0, 0);
      if (part.normals) {
        gl.bindBuffer(gl.ARRAY_BUFFER, part.normals);
        gl.enableVertexAttribArray(loc.n);
        gl.vertexAttribPointer(loc.n, 3, gl.FLOAT, false, 0, 0);
      } else {
        gl.disableVertexAttribArray(loc.n);
        gl.vertexAttrib3f(loc.n, 0, 0, 1);
      }
      gl.uniform3fv(loc.color, part.color);
      gl.uniform1f(loc.lit, part.mode === 4 ? 1 : 0);
      // Lines a little in front of the faces they bound.
      gl.enable(gl.POLYGON_OFFSET_FILL);
      gl.polygonOffset(1, 1);
      gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, part.indices);
      gl.drawElements(part.mode === 4 ? gl.TRIANGLES : gl.LINES, part.count, gl.UNSIGNED_INT, 0);
    });
  }

  var drag = null;
  canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, y: e.clientY }; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    view.yaw -= (e.clientX - drag.x) * 0.01;
    view.pitch = Math.max(-1.55, Math.min(1.55, view.pitch + (e.clientY - drag.y) * 0.01));
    drag = { x: e.clientX, y: e.clientY };
    draw();
  });
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    view.zoom = Math.max(0.2, Math.min(20, view.zoom * Math.exp(-e.deltaY * 0.001)));
    draw();
  }, { passive: false });
  canvas.addEventListener("dblclick", function () { view.yaw = home.yaw; view.pitch = home.pitch; view.zoom = home.zoom; draw(); });
  window.addEventListener("resize", draw);
  draw();
  canvas.setAttribute("data-ready", "1");
})();
