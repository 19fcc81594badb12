#!/bin/sh
# tests/bench/make_model.sh — `coli bench make-model` writes a valid, loadable
# model: the tiny shape in q4, q8, bf16, q4k and q6k passes `coli verify` and
# generates from token ids (q4k: the Q4_K_M mix, lm_head and attn_v in Q6_K,
# the expert downs of 128 columns in Q8_0); the same seed gives the same bytes whatever the thread count,
# another seed other bytes; --layers sets the depth; bad shapes and quants are
# refused with a message and leave no file. The glm4_moe shapes at --layers 2
# (one dense layer, one MoE layer with a shared expert and sigmoid routing):
# the logits of three tokens, in one pass and a token a forward (the decode
# path), are the same on the CPU and on the simulated device, and both generate
# (1 GiB a simulated device: a small context and staging; glm-4.5 needs two of
# them, a layer each). Without a tokenizer generate prints no tokens, so the
# token a forward logits stand for the generated tokens. tiny-mla (the MLA
# shapes' code path at tests/fixtures/deepseek_v3's width) has the converted
# fixture's tensor table and config, and decodes on the CPU.
set -u
fail() { echo "FAIL: $*"; exit 1; }
for q in q4 q8 bf16 q4k q6k; do
	"$COLI" bench make-model --shape tiny --quant $q -o m-$q.coli 2>log.txt || { cat log.txt; fail "make-model $q"; }
	"$COLI" verify m-$q.coli >/dev/null || fail "verify $q"
	"$COLI" generate -m m-$q.coli --ids 1,2,3 -n 8 >out.txt 2>err.txt || { cat err.txt; fail "generate $q"; }
	grep -q "generated 8 tok" err.txt || { cat err.txt; fail "generate $q: expected 8 tokens"; }
	echo "ok   tiny $q: verify, generate --ids"
done
"$COLI" inspect -v m-q4k.coli | awk '/^(lm_head|blk\.0\.attn_q|blk\.0\.attn_v) / { print $1, $2 }' >t.txt
printf 'lm_head q6_k\nblk.0.attn_q q4_k\nblk.0.attn_v q6_k\n' | cmp -s - t.txt || { cat t.txt; fail "q4k: not the Q4_K_M mix"; }
"$COLI" inspect m-q4k.coli | grep -q "^ *0 *16 *q4_k *q8_0 " || { "$COLI" inspect m-q4k.coli; fail "q4k: expert layer not q4_k with q8_0 downs"; }
echo "ok   q4k: Q4_K_M's mix"
"$COLI" bench make-model --shape tiny --threads 1 --seed 7 -o a.coli 2>/dev/null || fail "seed 7, 1 thread"
"$COLI" bench make-model --shape tiny --threads 2 --seed 7 -o b.coli 2>/dev/null || fail "seed 7, 2 threads"
"$COLI" bench make-model --shape tiny --threads 2 --seed 8 -o c.coli 2>/dev/null || fail "seed 8"
cmp -s a.coli b.coli || fail "same seed, different thread count: files differ"
cmp -s a.coli c.coli && fail "different seeds: same file"
echo "ok   deterministic per seed, independent of threads"
"$COLI" bench make-model --shape tiny --layers 3 -o l3.coli 2>/dev/null || fail "--layers 3"
"$COLI" inspect l3.coli | grep -q "^layers *3 (0 dense, 3 MoE)" || { "$COLI" inspect l3.coli; fail "--layers 3 not applied"; }
echo "ok   --layers"
# glm SHAPE GPU [SPLIT]: made at --layers 2, the logits of ids 1,2,3 (one pass and
# --ubatch 1) are the same on the CPU and on GPU, which holds the dense part
glm() {
	m="$1.coli" dev="--ctx 256 --stream-slots 8"
	"$COLI" bench make-model --shape "$1" --layers 2 -o "$m" 2>log.txt || { cat log.txt; fail "make-model $1"; }
	"$COLI" inspect "$m" | grep -q "^layers *2 (1 dense, 1 MoE)" || { "$COLI" inspect "$m"; fail "$1: not 1 dense + 1 MoE layer"; }
	for g in off "$2"; do
		# shellcheck disable=SC2086
		"$COLI" logits -m "$m" $dev --ubatch 8 --gpu "$g" ${3:+--split $3} --ids 1,2,3 -o "$g.f32" 2>"$g.err" &&
			"$COLI" logits -m "$m" $dev --ubatch 1 --gpu "$g" ${3:+--split $3} --ids 1,2,3 -o "$g-1.f32" 2>"$g-1.err" &&
			"$COLI" generate -m "$m" $dev --ubatch 8 --gpu "$g" ${3:+--split $3} --ids 1,2,3 -n 4 >/dev/null 2>"$g-gen.err" ||
			{ cat "$g.err" "$g-1.err" "$g-gen.err"; fail "$1 --gpu $g: does not run"; }
		grep -q "generated 4 tok" "$g-gen.err" || { cat "$g-gen.err"; fail "$1 --gpu $g: expected 4 tokens"; }
	done
	grep -q "dense part and KV cache.* on sim" "$2.err" || { cat "$2.err"; fail "$1 --gpu $2: the dense part stayed on the CPU"; }
	grep -q "running on the CPU" "$2.err" "$2-1.err" "$2-gen.err" &&
		{ cat "$2.err" "$2-1.err" "$2-gen.err"; fail "$1 --gpu $2: fell back to the CPU"; }
	cmp -s off.f32 "$2.f32" || fail "$1: logits differ, CPU vs --gpu $2"
	cmp -s off-1.f32 "$2-1.f32" || fail "$1: decode (--ubatch 1) logits differ, CPU vs --gpu $2"
	cmp -s off.f32 off-1.f32 || fail "$1: logits in one pass differ from a token a forward"
	echo "ok   $1 --layers 2: 1 dense + 1 MoE layer, CPU = --gpu $2 ($(sha256sum <off.f32 | cut -c1-16))"
	rm -f "$m"
}
glm glm-4.5-air sim
glm glm-4.5 sim:2 layers
# MLA (deepseek-v3, kimi-k2: too big to write here even at one layer, so their
# code path at tests/fixtures/deepseek_v3's width, tiny-mla): the tensor table
# (names, dtypes, shapes) and the config lines inspect prints equal those of the
# fixture as coli convert writes it, in each quant; the model runs a decode step
# on the CPU, with the same logits in one pass, a token a forward and with the
# dense part and experts on the simulated device
table() { "$COLI" inspect -v "$1" | awk '/^(tok_embd|out_norm|lm_head|blk\.)/ { NF -= 2; print }'; }
config() { "$COLI" inspect "$1" | sed -n '/^architecture/,/^routing/p'; }
for q in q4 q8 bf16; do
	"$COLI" bench make-model --shape tiny-mla --quant $q -o mla-$q.coli 2>log.txt || { cat log.txt; fail "make-model tiny-mla $q"; }
	"$COLI" convert "$FIXTURES/deepseek_v3" --quant $q -o fx-$q.coli --quiet 2>log.txt || { cat log.txt; fail "convert deepseek_v3 $q"; }
	"$COLI" verify mla-$q.coli >/dev/null || fail "verify tiny-mla $q"
	table mla-$q.coli >t-mla.txt
	table fx-$q.coli >t-fx.txt
	grep -q "^blk.2.attn_k_b " t-mla.txt || { cat t-mla.txt; fail "tiny-mla $q: no MLA tensors"; }
	cmp -s t-mla.txt t-fx.txt || { diff t-mla.txt t-fx.txt; fail "tiny-mla $q: tensor table differs from the converted fixture's"; }
	config mla-$q.coli >c-mla.txt
	config fx-$q.coli >c-fx.txt
	grep -q "^attention *MLA: q_lora 32, kv_lora 64, qk nope 32 + rope 16, v 32" c-mla.txt || { cat c-mla.txt; fail "tiny-mla $q: inspect shows no MLA config"; }
	grep -q "^rope scaling *YaRN x 4 of 128 positions" c-mla.txt || { cat c-mla.txt; fail "tiny-mla $q: inspect shows no YaRN"; }
	cmp -s c-mla.txt c-fx.txt || { diff c-mla.txt c-fx.txt; fail "tiny-mla $q: config differs from the converted fixture's"; }
	rm -f fx-$q.coli
	echo "ok   tiny-mla $q: tensor table and config = converted tests/fixtures/deepseek_v3's"
done
dev="--ctx 256"
# shellcheck disable=SC2086
"$COLI" logits -m mla-q4.coli $dev --ubatch 8 --ids 1,2,3 -o mla.f32 2>err.txt &&
	"$COLI" logits -m mla-q4.coli $dev --ubatch 1 --ids 1,2,3 -o mla-1.f32 2>>err.txt &&
	"$COLI" logits -m mla-q4.coli $dev --ubatch 8 --gpu sim --ids 1,2,3 -o mla-sim.f32 2>sim.txt &&
	"$COLI" generate -m mla-q4.coli $dev --ids 1,2,3 -n 1 >/dev/null 2>gen.txt ||
	{ cat err.txt sim.txt gen.txt; fail "tiny-mla: does not run"; }
grep -q "dense part and KV cache.* on sim" sim.txt || { cat sim.txt; fail "tiny-mla --gpu sim: the dense part stayed on the CPU"; }
grep -q "generated 1 tok" gen.txt || { cat gen.txt; fail "tiny-mla: expected 1 token"; }
cmp -s mla.f32 mla-1.f32 || fail "tiny-mla: logits in one pass differ from a token a forward"
cmp -s mla.f32 mla-sim.f32 || fail "tiny-mla: logits differ, CPU vs --gpu sim"
[ "$(wc -c <mla.f32)" -eq $((3 * 1024 * 4)) ] || fail "tiny-mla: expected 3 x 1024 logits"
echo "ok   tiny-mla: decodes on the CPU, one pass = a token a forward = --gpu sim ($(sha256sum <mla.f32 | cut -c1-16))"
"$COLI" bench make-model --shape nope -o x.coli 2>err.txt && fail "unknown shape accepted"
grep -q "qwen3-30b-a3b" err.txt || { cat err.txt; fail "unknown shape: message does not list the shapes"; }
"$COLI" bench make-model --shape tiny --quant f16 -o x.coli 2>err.txt && fail "f16 accepted"
ls x.coli* >/dev/null 2>&1 && fail "a refused make-model left a file"
echo "ok   refusals"
exit 0
