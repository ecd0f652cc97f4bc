# Ray: personae's `ray` extra (the Ray executor for chains and batches), so that
# tests/test_ray.py runs against a real local Ray cluster. Ray's wheel carries its
# own binaries (gcs_server, raylet); nothing else is downloaded. Idempotent: pip_extras
# (scripts/test.sh) installs nothing when a satisfying version is installed.
if ! pip_extras dev ray; then
  echo "setup 70-ray: pip could not install the ray extra" >&2
  return 1 2>/dev/null || exit 1
fi
if ! .venv/bin/python -c 'import ray' 2>/dev/null; then
  echo "setup 70-ray: ray is installed but does not import" >&2
  return 1 2>/dev/null || exit 1
fi
