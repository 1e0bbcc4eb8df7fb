#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks for vision2cad and builds it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium: the browser test opens the reports and indexes headless.
packages=(freecad-python3 python3-dev fonts-dejavu-core python3-numpy python3-scipy chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# FreeCAD's Python modules are built for Debian's interpreter; pyo3 links against it
# (PYO3_PYTHON is pinned in .cargo/config.toml).
test -x /usr/bin/python3.11 || { echo "setup: /usr/bin/python3.11 is missing" >&2; exit 1; }
PYTHONHOME=/usr /usr/bin/python3.11 -c "
import sys; sys.path += ['/usr/lib/freecad-python3/lib', '/usr/lib/freecad/Mod']
import FreeCAD, Part, Sketcher, PartDesign" \
  || { echo "setup: FreeCAD does not import in /usr/bin/python3.11" >&2; exit 1; }

cargo build --release --locked

# The default retrieval index (about 1.5 min the first time; kept afterwards): generated
# parts of a seed no evaluation uses, and the public DeepCAD sample when it is here.
# Where it lives and how to rebuild it: README.md ("Retrieval").
deepcad="${VISION2CAD_DATA:-../shared/data}/seekcad-example"
if [ -d "$deepcad" ]; then
  target/release/vision2cad gerd default-index --deepcad "$deepcad"
else
  echo "setup: no DeepCAD sample at $deepcad; the default index holds generated parts only" >&2
  target/release/vision2cad gerd default-index
fi
echo "setup: done; the binary is target/release/vision2cad" >&2
