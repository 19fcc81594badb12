#!/bin/sh
# Every number a program takes is read strictly (core/parse.c): junk, a
# trailing unit, an overflow or a value outside the option's range is
# refused with exit 2 and a message naming the option, before any model is
# opened; the same holds for the engine options' environment variables.
# Valid values still work (one real generation with sampling settings).
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# refused CODE OPTION ARGS...: the command exits CODE and stderr names OPTION
refused() {
	code=$1 opt=$2
	shift 2
	"$@" >out.txt 2>err.txt
	rc=$?
	if [ $rc -ne "$code" ] || ! grep -q -- "$opt" err.txt; then
		bad "$* -> exit $rc (want $code), stderr: $(cat err.txt)"
	else
		echo "ok   $(head -n 1 err.txt)"
	fi
}

M=none.coli # never opened: options are refused before the model
refused 2 "-n 'abc'" "$COLI" generate -m $M -p hi -n abc
refused 2 "-n '99999999999'" "$COLI" generate -m $M -p hi -n 99999999999
refused 2 "-n '-1'" "$COLI" generate -m $M -p hi -n -1
refused 2 "--temperature 'abc'" "$COLI" generate -m $M -p hi --temperature abc
refused 2 "--top-p '2'" "$COLI" generate -m $M -p hi --top-p 2
refused 2 "--top-p '0'" "$COLI" generate -m $M -p hi --top-p 0
refused 2 "--top-k '-1'" "$COLI" generate -m $M -p hi --top-k -1
refused 2 "--seed 'xyz'" "$COLI" generate -m $M -p hi --seed xyz
refused 2 "--seed '-1'" "$COLI" generate -m $M -p hi --seed -1
refused 2 "--threads '-3': expected an integer in 0..4096" "$COLI" generate -m $M -p hi --threads -3
refused 2 "--ctx '5x'" "$COLI" generate -m $M -p hi --ctx 5x
refused 2 "--ram-gb ''" "$COLI" generate -m $M -p hi --ram-gb ""
refused 2 "--stream 'bogus': expected auto, off or only" "$COLI" generate -m $M -p hi --stream bogus
refused 2 "--gpu '0,0'" "$COLI" generate -m $M -p hi --gpu 0,0
refused 2 "COLI_THREADS='-3'" env COLI_THREADS=-3 "$COLI" generate -m $M -p hi
refused 2 "COLI_STREAM='bogus'" env COLI_STREAM=bogus "$COLI" generate -m $M -p hi
refused 2 "COLI_DEV_GRAPH='2'" env COLI_DEV_GRAPH=2 "$COLI" generate -m $M -p hi
refused 2 "--ubatch '5x'" "$COLI" logits -m $M --text hi -o l.f32 --ubatch 5x
refused 2 "--window '1'" "$COLI" perplexity -m $M -f x.txt --window 1
refused 2 "--tokens 'abc'" "$COLI" bench decode -m $M --tokens abc
refused 2 "--rounds '0'" "$COLI" bench decode -m $M --rounds 0
refused 2 "--vram-frac '2'" "$COLI" bench stream -m $M --vram-frac 2
refused 2 "--qd 'abc'" "$COLI" bench io -m $M --qd abc
refused 2 "--seed '1x'" "$COLI" bench io -m $M --seed 1x
refused 2 "--threads '-3'" "$COLI" bench kernels --threads -3
refused 2 "--layers 'abc'" "$COLI" bench make-model --shape x -o y.coli --layers abc
refused 2 "--clients '0'" "$COLI" bench serve --url http://127.0.0.1:1 --clients 0
refused 2 "--max-tokens '8x'" "$COLI" bench serve --url http://127.0.0.1:1 --max-tokens 4:8x
refused 2 "--prompt-tokens '3'" "$COLI" bench serve --url http://127.0.0.1:1 --prompt-tokens 5:3
refused 2 "--shared-prefix '1.5'" "$COLI" bench serve --url http://127.0.0.1:1 --shared-prefix 1.5
refused 2 "--threads '0'" "$COLI" convert x -o y.coli --threads 0

if [ -x "$COLID" ]; then
	refused 2 "--port 'abc'" "$COLID" -m $M --port abc
	refused 2 "--port '70000': expected an integer in 0..65535" "$COLID" -m $M --port 70000
	refused 2 "--timeout '5x'" "$COLID" -m $M --timeout 5x
	refused 2 "--queue '0'" "$COLID" -m $M --queue 0
	refused 2 "--max-connections 'x'" "$COLID" -m $M --max-connections x
	refused 2 "--max-body-bytes '10'" "$COLID" -m $M --max-body-bytes 10
	refused 2 "--shutdown-grace '-1'" "$COLID" -m $M --shutdown-grace -1
	refused 2 "--header-timeout '5x'" "$COLID" -m $M --header-timeout 5x
	refused 2 "--header-timeout '0'" "$COLID" -m $M --header-timeout 0
	refused 2 "--max-conn-per-ip '0'" "$COLID" -m $M --max-conn-per-ip 0
	refused 2 "COLI_IO='mmap'" env COLI_IO=mmap "$COLID" -m $M
else
	echo "colid not built (libmicrohttpd missing): its options not checked"
fi

# valid values: unchanged behaviour
"$COLI" convert "$FIXTURES/qwen3_moe" -o m.coli --quant q8 >/dev/null 2>&1 || { echo "convert failed"; exit 1; }
"$COLI" generate -m m.coli -p "hello" -n 3 --temperature 0.7 --top-p 0.9 --top-k 5 \
	--seed 0x2a --threads 2 --ram-gb 8 --stream off >out.txt 2>err.txt &&
	grep -q "generated 3 tok" err.txt && echo "ok   valid values generate" ||
	{ bad "valid values: $(cat err.txt)"; }
exit $fail
