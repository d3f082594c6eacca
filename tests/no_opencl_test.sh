#!/usr/bin/env bash
# The compiler needs no OpenCL loader: none of the given binaries links one.
set -u
status=0
for binary in "$@"; do
  if ldd "$binary" | grep -i 'libOpenCL'; then
    echo "$binary links an OpenCL loader"
    status=1
  fi
done
[ "$status" = 0 ] && echo "no OpenCL loader in: $*"
exit $status
