#!/bin/sh
# tests/convert/bad_inputs.sh — every bad input makes `coli convert` exit
# nonzero with a message naming the file and the problem, and leaves neither
# the output file nor a temporary behind: missing shard, four kinds of broken
# safetensors header, unsupported model_type, unsupported tensor dtypes,
# unknown / missing tensors, a shape mismatch, disk
# full (RLIMIT_FSIZE; a small tmpfs when root), missing or unwritable output
# directory. Also checks config dialect results (rope_parameters, eos union)
# and a tokenizer_config.json holding an integer past 64 bits; deepseek_v3's
# refusals (attention_bias, YaRN without its original context, a kv_lora_rank
# the tensors do not have); gpt_oss's (a layer type it does not run, an MXFP4
# scale past q8's fp16, mxfp4 in another family, experts of another layout).
MK="python3 $ROOT/tests/convert/mkckpt.py"
command -v python3 >/dev/null || { echo "python3 needed to make checkpoints"; exit 77; }
fail=0

# expect_fail LABEL OUT PATTERN... -- ARGS... : convert must fail, stderr must
# match every PATTERN (grep -E), OUT and OUT.tmp.* must not exist.
expect_fail() {
	label=$1 out=$2
	shift 2
	pats=""
	while [ "$1" != "--" ]; do pats="$pats
$1"; shift; done
	shift
	"$COLI" convert "$@" -o "$out" 2>err.txt
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "FAIL $label: convert succeeded"; fail=1; return
	fi
	echo "$pats" | while IFS= read -r p; do
		[ -z "$p" ] && continue
		grep -qE -- "$p" err.txt || { echo "FAIL $label: message lacks /$p/:"; cat err.txt; echo x >>failed; }
	done
	if ls "$out" "$out".tmp* >/dev/null 2>&1; then
		echo "FAIL $label: left behind: $(ls "$out" "$out".tmp* 2>/dev/null)"; echo x >>failed
	fi
	if [ -f failed ]; then
		fail=1; rm -f failed
	else
		echo "ok   $label: $(grep -v warning err.txt | head -1)"
	fi
}

# 1. missing shard named by the index
$MK sh --arch qwen3_moe --shards 3 || exit 1
rm sh/model-00002-of-00003.safetensors
expect_fail missing-shard o.coli 'model-00002-of-00003.safetensors' 'model.safetensors.index.json' \
	'missing shard' -- sh

# 1b. an index entry that is not a file beside it: the message names the
# tensor (it was formatted from the freed index; found by tools/fuzz/fuzz_config.c)
$MK shx --arch qwen3_moe --shards 3 || exit 1
python3 - shx/model.safetensors.index.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
k = sorted(j["weight_map"])[0]
j["weight_map"][k] = "../elsewhere.safetensors"
json.dump(j, open(sys.argv[1], "w"))
EOF
expect_fail index-path o.coli 'model.safetensors.index.json' \
	"weight_map entry for '[a-z_.0-9]+' is not a file name" -- shx

# 2. broken safetensors headers (valid checkpoint, then one file rewritten)
$MK good --arch olmoe || exit 1
corrupt() { # corrupt KIND: rewrites good/model.safetensors into bad_KIND/
	rm -rf "bad_$1" && cp -r good "bad_$1"
	python3 - "$1" "bad_$1/model.safetensors" <<'EOF'
import json, struct, sys
kind, path = sys.argv[1], sys.argv[2]
raw = open(path, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
hdr, data = json.loads(raw[8:8 + n]), raw[8 + n:]
name = next(k for k in hdr if k != '__metadata__')
if kind == 'hdrlen':
    open(path, 'wb').write(struct.pack('<Q', len(raw) + 100) + raw[8:])
    sys.exit()
if kind == 'json':
    h = raw[8:8 + n].replace(b'"dtype"', b'"dtype" "', 1)
elif kind == 'offsets':
    hdr[name]['data_offsets'][1] = len(data) + 4096
    h = json.dumps(hdr).encode()
elif kind == 'size':
    hdr[name]['shape'][0] += 1
    h = json.dumps(hdr).encode()
open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)
EOF
}
corrupt hdrlen
expect_fail header-length o.coli 'bad_hdrlen/model.safetensors' 'header length' -- bad_hdrlen
corrupt json
expect_fail header-json o.coli 'bad_json/model.safetensors' 'invalid JSON' -- bad_json
corrupt offsets
expect_fail header-offsets o.coli 'bad_offsets/model.safetensors' 'data_offsets.*outside' -- bad_offsets
corrupt size
expect_fail header-size o.coli 'bad_size/model.safetensors' 'dtype BF16 x shape needs' -- bad_size

# 3. unsupported model_type
cp -r good llama && sed -i 's/"olmoe"/"llama"/' llama/config.json
expect_fail model-type o.coli 'llama/config.json' "'llama' is not supported" 'qwen3_moe, qwen2_moe, olmoe, mixtral' -- llama

# 4. unsupported tensor dtypes
$MK i8 --arch mixtral --extra model.layers.0.self_attn.q_proj.weight_scale:I8 || exit 1
expect_fail dtype-I8 o.coli 'i8/model.safetensors' 'weight_scale' 'dtype I8' -- i8
$MK f8 --arch qwen2_moe --extra lm_head.weight_scale_inv:F8_E4M3 || exit 1
expect_fail dtype-F8 o.coli 'f8/model.safetensors' 'weight_scale_inv' 'F8_E4M3' -- f8

# 5. unknown tensor, missing tensor, shape mismatch (q4 on 80 columns converts:
# tests/convert/quant_fallback.sh)
$MK unk --arch qwen3_moe --extra model.layers.1.mlp.bogus.weight:BF16 || exit 1
expect_fail unknown-name o.coli 'unk/model.safetensors' 'mlp.bogus.weight' 'not part of' -- unk
$MK miss --arch qwen3_moe --drop model.layers.2.mlp.experts.3.up_proj.weight || exit 1
expect_fail missing-tensor o.coli 'miss/model.safetensors' 'model.layers.2.mlp.experts.3.up_proj.weight' -- miss
$MK miss2 --arch mixtral --drop model.layers.0.block_sparse_moe.gate.weight || exit 1
expect_fail missing-router o.coli 'model.layers.0.block_sparse_moe.gate.weight' -- miss2
cp -r good shape && sed -i 's/"vocab_size": 128/"vocab_size": 256/' shape/config.json
expect_fail shape o.coli 'shape/model.safetensors' 'embed_tokens.weight' 'shape \[128, 64\].*\[256, 64\]' -- shape

# 6. disk full: RLIMIT_FSIZE (SIGXFSZ ignored -> EFBIG), then a small tmpfs when root
(trap '' XFSZ; ulimit -f 64; "$COLI" convert good -o full.coli 2>err.txt; echo $? >rc.txt)
if [ "$(cat rc.txt)" = 0 ]; then
	echo "FAIL disk-full(fsize): succeeded"; fail=1
elif ! grep -q 'full.coli' err.txt || ! grep -qiE 'too large|no space|EFBIG' err.txt; then
	echo "FAIL disk-full(fsize): message:"; cat err.txt; fail=1
elif ls full.coli* >/dev/null 2>&1; then
	echo "FAIL disk-full(fsize): left $(ls full.coli*)"; fail=1
else
	echo "ok   disk-full(fsize): $(grep -v warning err.txt | head -1)"
fi
mkdir -p mnt
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=48k tmpfs mnt 2>/dev/null; then
	expect_fail disk-full-tmpfs mnt/o.coli 'mnt/o.coli' 'space|too large' -- good
	umount mnt
else
	echo "skip disk-full-tmpfs: needs root and tmpfs"
fi

# 7. output directory missing / unwritable
expect_fail out-missing nodir/sub/o.coli 'nodir/sub/o.coli' -- good
mkdir ro && chmod 555 ro
if [ "$(id -u)" != 0 ]; then
	expect_fail out-unwritable ro/o.coli 'ro/o.coli' -- good
else
	expect_fail out-unwritable /proc/o.coli '/proc/o.coli' -- good
fi

# 8. config dialects: rope_parameters, eos union from generation_config.json
$MK rp --arch qwen3_moe --rope-params --shards 2 || exit 1
"$COLI" convert rp -o rp.coli 2>/dev/null || { echo "FAIL rope_parameters convert"; fail=1; }
grep -aq '"rope_theta": 500000' rp.coli || { echo "FAIL rope_parameters.rope_theta not used"; fail=1; }
tr -d ' \n' <rp.coli | grep -aq '"eos":\[2,3\]' || { echo "FAIL eos union"; fail=1; }
tr -d ' \n' <rp.coli | grep -aq '"norm_topk_prob":1' || { echo "FAIL norm_topk_prob"; fail=1; }

# 9. integers past 64 bits, as transformers writes "no limit": tokenizer_config.json's
# model_max_length converts, and the model reads the same as without it
cp -r "$FIXTURES/qwen3_moe" big && chmod -R u+w big
python3 - big/tokenizer_config.json <<'PY' || exit 1
import json, sys
p = sys.argv[1]
t = json.load(open(p))
t["model_max_length"] = 1000000000000000019884624838656
json.dump(t, open(p, "w"))
PY
grep -q 1000000000000000019884624838656 big/tokenizer_config.json || { echo "FAIL big int not written"; fail=1; }
if "$COLI" convert big -o big.coli 2>err.txt && "$COLI" convert "$FIXTURES/qwen3_moe" -o ref.coli 2>/dev/null &&
	"$COLI" logits -m big.coli --ids 1,2,3 -o big.f32 --gpu off 2>/dev/null &&
	"$COLI" logits -m ref.coli --ids 1,2,3 -o ref.f32 --gpu off 2>/dev/null && cmp -s big.f32 ref.f32; then
	echo "ok   model_max_length 1e30: converts, same logits"
else
	echo "FAIL model_max_length 1e30:"; cat err.txt; fail=1
fi
# 10. minimax_m2: what coli does not run is refused by name (linear attention layers,
# a sliding window shorter than the context, per-head QK norm, softmax scoring), and a
# missing correction bias is named as the Hub spells it
$MK mm --arch minimax_m2 || exit 1
mm_bad() { # NAME PYTHON-EXPR-ON-cfg PATTERN
	rm -rf "mm_$1" && cp -r mm "mm_$1"
	python3 - "mm_$1/config.json" "$2" <<'PY' || exit 1
import json, sys
cfg = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(cfg, open(sys.argv[1], "w"))
PY
	expect_fail "minimax-$1" o.coli "mm_$1/config.json" "$3" -- "mm_$1"
}
mm_bad linear 'cfg["attn_type_list"][1] = 0' 'attn_type_list\[1\].*linear'
mm_bad window 'cfg["sliding_window"] = 1024' 'sliding_window 1024 < max_position_embeddings'
mm_bad qknorm 'cfg["qk_norm_type"] = "per_head"' "qk_norm_type 'per_head'"
mm_bad scoring 'cfg["scoring_func"] = "softmax"' "scoring_func 'softmax'"
mm_bad shared 'cfg["shared_intermediate_size"] = 64' 'shared_intermediate_size 64'
$MK mm_nobias --arch minimax_m2 --drop model.layers.1.block_sparse_moe.e_score_correction_bias || exit 1
expect_fail minimax-missing-bias o.coli 'model.layers.1.block_sparse_moe.e_score_correction_bias' -- mm_nobias
# deepseek_v3 (MLA): attention biases, dynamic NTK rope scaling, and
# a kv_lora_rank the tensors do not have are refused, naming what
$MK ds --arch deepseek_v3 >/dev/null || exit 1
for k in bias yarn rank; do cp -r ds ds_$k; done
python3 - ds_bias ds_yarn ds_rank <<'PY'
import json, sys
for d, edit in zip(sys.argv[1:], ("bias", "yarn", "rank")):
    p = d + "/config.json"
    c = json.load(open(p))
    if edit == "bias":
        c["attention_bias"] = True
    elif edit == "yarn":
        c["rope_scaling"]["type"] = "dynamic"
    else:
        c["kv_lora_rank"] = 64
    json.dump(c, open(p, "w"))
PY
expect_fail ds-bias o.coli 'ds_bias/config.json' 'attention_bias=true is not supported for deepseek_v3' -- ds_bias
expect_fail ds-yarn o.coli 'ds_yarn/config.json' "rope_scaling.rope_type 'dynamic' is not supported" 'its batch' -- ds_yarn
expect_fail ds-rank o.coli 'ds_rank/model.safetensors' 'kv_a_proj_with_mqa.weight. has shape \[40, 64\].*\[72, 64\]' -- ds_rank
# gpt_oss: a layer type other than sliding/full attention, an MXFP4 scale past fp16's
# range under q8 (byte 3 of layer 1's down scales, row 1 block 1, set to 200),
# quant_method mxfp4 in another
# family, and expert tensors in the [E, 2I, H] layout transformers does not save
go_bad() { # NAME SRC-FIXTURE PYTHON-ON-d PATTERN... -- ARGS
	name=$1 src=$2 py=$3
	shift 3
	rm -rf "go_$name" && cp -r "$FIXTURES/$src" "go_$name"
	python3 - "go_$name" "$py" <<'PY' || exit 1
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
def tensor(name):  # (absolute offset, shape) of a tensor of model.safetensors
    f = open(d + "/model.safetensors", "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    return 8 + n + h[name]["data_offsets"][0], h[name]["shape"]
exec(sys.argv[2])
json.dump(cfg, open(d + "/config.json", "w"))
PY
	expect_fail "gpt_oss-$name" o.coli "$@" "go_$name"
}
go_bad layers gpt_oss 'cfg["layer_types"][1] = "chunked_attention"' \
	"go_layers/config.json" "layer_types\[1\] 'chunked_attention' is not supported" --
go_bad scale gpt_oss_mxfp4 '
off, shape = tensor("model.layers.1.mlp.experts.down_proj_scales")
f = open(d + "/model.safetensors", "r+b"); f.seek(off + 3); f.write(bytes([200]))' \
	"model.layers.1.mlp.experts.down_proj_scales' row 1 block 1: MXFP4 scale 200" "fp16" --
# a scale under fp16's range (byte 3 set to 50: 2^-77) converts, its block written as
# zero and counted on stderr
rm -rf go_tiny && cp -r "$FIXTURES/gpt_oss_mxfp4" go_tiny
python3 - go_tiny <<'PY' || exit 1
import json, struct, sys
f = open(sys.argv[1] + "/model.safetensors", "r+b")
n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n))
f.seek(8 + n + h["model.layers.1.mlp.experts.down_proj_scales"]["data_offsets"][0] + 3)
f.write(bytes([50]))
PY
if "$COLI" convert go_tiny -o tiny.coli 2>err.txt &&
	grep -q "1 MXFP4 block(s) with a scale under 2^-24.*written as zero" err.txt; then
	echo "ok   gpt_oss-tiny-scale: $(grep MXFP4 err.txt | tail -1)"
else
	echo "FAIL gpt_oss-tiny-scale:"; cat err.txt; fail=1
fi
rm -f tiny.coli
# rope scaling: a type no family coli reads uses, a YaRN factor below 1
go_bad llama3 qwen3_moe 'cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}' \
	"go_llama3/config.json" "rope_scaling.rope_type 'llama3' is not supported" 'default, linear and yarn' --
go_bad yarnf qwen3_moe 'cfg["rope_scaling"] = {"type": "yarn", "factor": 0.5, "original_max_position_embeddings": 256}' \
	"go_yarnf/config.json" 'YaRN rope scaling with a factor that is not a number in \[1, 1e6\)' --
go_bad family qwen3_moe 'cfg["quantization_config"] = {"quant_method": "mxfp4"}' \
	"go_family/config.json" "'mxfp4' is read for gpt_oss only, not qwen3_moe" --
go_bad layout gpt_oss 'cfg["intermediate_size"] = 32' \
	"go_layout/model.safetensors" "down_proj' has shape \\[8, 64, 64\\].*\\[8, 32, 64\\] \\(x @ W" --
exit $fail
