# Sourced by the device scripts: installs the carried wheels (.device/whl) into $WORK/site,
# byte-compiles it and src/ (as a pip install would) and puts both on PYTHONPATH. Needs ROOT,
# OUT, WORK and PYTHON set; the install's output goes to $OUT/install.txt.
SITE=$WORK/site
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$ROOT"/.device/whl/*.whl >"$OUT/install.txt" 2>&1 \
    || echo "pip install failed: $?" >>"$OUT/install.txt"
"$PYTHON" -m compileall -q "$SITE" "$ROOT/src" >/dev/null 2>&1
export PYTHONPATH=$SITE:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
