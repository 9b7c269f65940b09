#!/usr/bin/env bash
# Makes a minimal base image from this machine's files, for building the image where no
# registry is reachable: the shared libraries BINARY links, CA certificates, a passwd and
# group naming UID/GID 10001, and /tmp and /data. Imported as localhost/stackhouse-base:local.
set -euo pipefail
binary="${1:?usage: make-base.sh BINARY}"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{etc/ssl/certs,tmp,data,usr/local/bin}
chmod 1777 "$root/tmp" "$root/data"
# The loader and every library ldd names, at the paths the binary asks for.
for lib in $(ldd "$binary" | grep -oE '/[^ ]+\.so[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
echo 'root:x:0:0:root:/:/sbin/nologin
stackhouse:x:10001:10001:stackhouse:/data:/sbin/nologin' > "$root/etc/passwd"
echo 'root:x:0:
stackhouse:x:10001:' > "$root/etc/group"
tar -C "$root" -cf "$root.tar" .
podman import "$root.tar" localhost/stackhouse-base:local >/dev/null
rm -f "$root.tar"
