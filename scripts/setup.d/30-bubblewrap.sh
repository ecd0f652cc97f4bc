# bubblewrap (bwrap): the run_shell sandbox. Tests check that a write outside the workspace,
# a read of the hidden home and a loopback connection are refused inside it.
apt_install bubblewrap
if ! bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-net \
    --die-with-parent --new-session -- true 2>/dev/null; then
  echo "30-bubblewrap.sh: bwrap is installed but cannot create namespaces here (the sandbox tests need it)" >&2
  exit 1
fi
