#!/bin/sh
# tests/core/kv_fit.sh — a KV cache too large for the dense device
# (core/forward/dense_dev.c kv_fit_hint): the open says what did not fit and
# about how many tokens of cache would, and the suggestion holds. On the
# simulated device (1 GB):
#   --ctx 600000 --kv-type f32 (tiny shape: 2 KB a token, 1.23 GB): "cannot
#       hold the dense part ... about N tokens of cache fit beside the weights
#       (--kv-gb G ...)", and the run goes on with the dense part on the CPU
#   --ctx N: the dense part and its cache go on the device
#   --ctx 600000 --kv-gb G: so does a pool of G GB
#   deepseek_v3 fixture (MLA: its latent rows are the pool's blocks on the
#       device too), --ctx 3000000: the same hint, and --kv-gb G puts the
#       dense part on the device
set -u
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
gen() { "$COLI" generate -m tiny.coli --ids 1,2,3 -n 2 --gpu sim:1 --ctx-override --kv-type f32 "$@" \
	>out.txt 2>err.txt; }

gen --ctx 600000 || { cat err.txt; bad "--ctx 600000: generate failed"; }
line=$(grep "cannot hold the dense part" err.txt)
n=$(echo "$line" | sed -n 's/.*about \([0-9]*\) tokens of cache fit beside the weights.*/\1/p')
g=$(echo "$line" | sed -n 's/.*(--kv-gb \([0-9.]*\),.*/\1/p')
if [ -z "$n" ] || [ -z "$g" ]; then
	cat err.txt
	bad "--ctx 600000: no fit hint"
elif [ "$n" -ge 600000 ] || [ "$n" -lt 100000 ]; then
	bad "--ctx 600000: $n tokens said to fit ($line)"
else
	echo "ok: --ctx 600000 does not fit sim:0; about $n tokens would (--kv-gb $g)"
	grep -q "sim:0: cannot hold\|running on the CPU" err.txt || bad "no fall back said"
	gen --ctx "$n" || { cat err.txt; bad "--ctx $n: generate failed"; }
	grep -q "^coli: dense part and KV cache on sim:0" err.txt &&
		echo "ok: --ctx $n puts the dense part and its cache on sim:0" ||
		{ cat err.txt; bad "--ctx $n: the dense part is not on sim:0"; }
	gen --ctx 600000 --kv-gb "$g" || { cat err.txt; bad "--kv-gb $g: generate failed"; }
	grep -q "^coli: dense part and KV cache on sim:0" err.txt &&
		echo "ok: --kv-gb $g puts the dense part and its cache on sim:0" ||
		{ cat err.txt; bad "--kv-gb $g: the dense part is not on sim:0"; }
fi
"$COLI" convert "$FIXTURES/deepseek_v3" -o ds.coli >/dev/null 2>&1 || { echo "convert deepseek_v3 failed"; exit 1; }
"$COLI" generate -m ds.coli --ids 1,2,3 -n 2 --gpu sim:1 --ctx-override --ctx 3000000 >out.txt 2>err.txt ||
	{ cat err.txt; bad "MLA --ctx 3000000: generate failed"; }
g=$(sed -n 's/.*tokens of cache fit beside the weights (--kv-gb \([0-9.]*\),.*/\1/p' err.txt)
if [ -z "$g" ]; then
	cat err.txt
	bad "MLA --ctx 3000000: no --kv-gb hint"
else
	"$COLI" generate -m ds.coli --ids 1,2,3 -n 2 --gpu sim:1 --ctx-override --ctx 3000000 --kv-gb "$g" \
		>out.txt 2>err.txt || { cat err.txt; bad "MLA --kv-gb $g: generate failed"; }
	grep -q "^coli: dense part and KV cache on sim:0" err.txt &&
		echo "ok: MLA --ctx 3000000 does not fit sim:0; --kv-gb $g does" ||
		{ cat err.txt; bad "MLA --kv-gb $g: the dense part is not on sim:0"; }
fi
exit $fail
