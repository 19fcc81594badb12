#!/bin/sh
# `make install` as a library people embed: install into a DESTDIR, build
# tests/tools/embed/example.c against the installed header and library only,
# through pkg-config (PKG_CONFIG_SYSROOT_DIR at the DESTDIR), once with
# libcoli.a linked in and once against libcoli.so (its soname, through
# LD_LIBRARY_PATH), and check that both generate the token that
# `coli generate -n 1 --temperature 0` does on the same model and prompt.
# Then `make uninstall` leaves nothing but empty folders.
set -e
fail() { echo "FAIL: $*"; exit 1; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }
CC=${CC:-cc}
dest="$PWD/dest"
# a make run from make test must not join the outer make's jobserver
unset MAKEFLAGS MFLAGS MAKELEVEL
# make install builds what is missing with the knobs it is given (none here):
# a build folder made with other knobs would be rebuilt under the caller
flags=$(make -s -C "$ROOT" BUILD="$BUILD" \
	--eval "coli-print-flags: ; @echo '\$(CC) \$(CFLAGS) \$(LDFLAGS) \$(LDLIBS)'" coli-print-flags)
if [ "$flags" != "$(cat "$ROOT/$BUILD/.flags")" ]; then
	echo "skip: $BUILD was built with other knobs (SAN, DEBUG, NVCC...): make install would rebuild it"
	exit 77
fi

make -C "$ROOT" BUILD="$BUILD" install DESTDIR="$dest" PREFIX=/usr >install.log 2>&1 ||
	{ tail -n 20 install.log; fail "make install"; }
for f in usr/bin/coli usr/lib/libcoli.a usr/lib/libcoli.so.0.1.0 usr/include/coli/coli.h \
	usr/include/coli/cpu/dtype.h usr/lib/pkgconfig/coli.pc; do
	[ -f "$dest/$f" ] || fail "make install did not write $f"
done
[ "$(readlink "$dest/usr/lib/libcoli.so")" = libcoli.so.0 ] || fail "libcoli.so -> libcoli.so.0"
[ "$(readlink "$dest/usr/lib/libcoli.so.0")" = libcoli.so.0.1.0 ] || fail "libcoli.so.0 link"
readelf -d "$dest/usr/lib/libcoli.so.0.1.0" | grep -q 'SONAME.*\[libcoli\.so\.0\]' ||
	fail "libcoli.so.0.1.0 has no soname libcoli.so.0"
if [ -x "$ROOT/$BUILD/colid" ]; then
	[ -x "$dest/usr/bin/colid" ] || fail "colid built but not installed"
	grep -q '^ExecStart=/usr/bin/colid ' "$dest/usr/lib/systemd/system/colid.service" ||
		fail "colid.service not installed with ExecStart in BINDIR"
fi

export PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_PATH="$dest/usr/lib/pkgconfig"
pkg-config --exists coli || fail "pkg-config: $(pkg-config --print-errors --exists coli 2>&1)"
cp "$ROOT/tests/tools/embed/example.c" . # built here: no -I into the source tree
# shellcheck disable=SC2046
"$CC" -std=c11 -Wall -Werror -o ex_shared example.c $(pkg-config --cflags --libs coli) ||
	fail "example against libcoli.so"
# libcoli.a linked in, its dependencies shared: with pkgconf, depth 2 (the
# query, then coli.pc) keeps their own private libraries (hwloc's -ludev) out
depth=
pkg-config --maximum-traverse-depth=2 --exists coli 2>/dev/null && depth=--maximum-traverse-depth=2
libs=$(pkg-config --static $depth --libs coli | sed 's/-lcoli/-l:libcoli.a/')
# shellcheck disable=SC2046,SC2086
"$CC" -std=c11 -Wall -Werror -o ex_static example.c $(pkg-config --cflags coli) $libs ||
	fail "example against libcoli.a ($libs)"
readelf -d ex_shared | grep -q 'NEEDED.*\[libcoli\.so\.0\]' || fail "ex_shared does not need libcoli.so.0"
if readelf -d ex_static | grep -q libcoli; then fail "ex_static needs a shared libcoli"; fi

"$COLI" convert "$FIXTURES/qwen3_moe" -o m.coli --quant q8 >/dev/null 2>&1 || fail "convert"
prompt="The quick brown fox"
"$COLI" generate -m m.coli -p "$prompt" -n 1 --temperature 0 >want.txt 2>want.err ||
	fail "coli generate: $(tail -n 3 want.err)"
LD_LIBRARY_PATH="$dest/usr/lib" ldd ex_shared | grep -q "libcoli.so.0 => $dest/usr/lib/" ||
	fail "ex_shared does not load the installed libcoli.so.0"
LD_LIBRARY_PATH="$dest/usr/lib" ./ex_shared m.coli "$prompt" 1 >shared.txt 2>shared.err ||
	fail "ex_shared: $(tail -n 3 shared.err)"
./ex_static m.coli "$prompt" 1 >static.txt 2>static.err || fail "ex_static: $(tail -n 3 static.err)"
[ -s want.txt ] || fail "coli generate printed no text for one token"
cmp -s want.txt shared.txt || fail "shared: '$(cat shared.txt)', coli generate: '$(cat want.txt)'"
cmp -s want.txt static.txt || fail "static: '$(cat static.txt)', coli generate: '$(cat want.txt)'"
echo "one token: '$(cat want.txt)' ($(grep ids: static.err))"

make -C "$ROOT" BUILD="$BUILD" uninstall DESTDIR="$dest" PREFIX=/usr >uninstall.log 2>&1 ||
	{ tail -n 20 uninstall.log; fail "make uninstall"; }
left=$(find "$dest" ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"
echo ok
