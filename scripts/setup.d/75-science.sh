# The `science` extra: h5py, netCDF4 and pyarrow, so that handover artifact summaries
# (personae.handover.artifact_formats) are tested against the real libraries on small
# files the tests make (tests/test_handover_artifact_formats.py). Wheels only; nothing
# else is downloaded. Idempotent: pip_extras (scripts/test.sh) installs nothing when a
# satisfying version is installed.
if ! pip_extras dev science; then
  echo "setup 75-science: pip could not install the science extra" >&2
  return 1 2>/dev/null || exit 1
fi
if ! .venv/bin/python -c 'import h5py, netCDF4, pyarrow.parquet' 2>/dev/null; then
  echo "setup 75-science: the science extra is installed but does not import" >&2
  return 1 2>/dev/null || exit 1
fi
