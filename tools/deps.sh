#!/bin/sh
# Install the Debian/Ubuntu packages coli builds and tests with.
# Usage: tools/deps.sh PKG...   (called by `make deps`, which `make run` and `make test` run)
# As root on a system with apt-get, missing packages are installed; otherwise the
# exact install line is printed and the script fails so the user knows what to do.
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || { echo "deps: apt-get update failed"; exit 1; }
	apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
		echo "deps: apt-get install$missing failed"; exit 1; }
	exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps: not a Debian/Ubuntu system; install the equivalents of:$missing"
	exit 0
fi
echo "deps: missing packages; run as root: apt-get install$missing"
exit 1
