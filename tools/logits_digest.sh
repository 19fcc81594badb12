#!/bin/sh
# tools/logits_digest.sh — two lines per (fixture, quant, placement arm): the
# sha256 of `coli logits` over a fixed text and of 24 greedy tokens after it.
# Two builds print the same lines when a change kept every bit (a
# refactor's "same bits" check):
#
#   tools/logits_digest.sh build/coli > new.txt
#   tools/logits_digest.sh /tmp/old/build/coli > old.txt && diff old.txt new.txt
#
# ARMS overrides the placement arms (default: CPU, the simulated device, the
# smallest RAM budget; add "gpu" on a GPU host). Converted fixtures are kept
# in $DIGEST_DIR (default /tmp/coli-digest) and reused.
set -u
COLI=${1:?usage: tools/logits_digest.sh COLI}
DIR=${DIGEST_DIR:-/tmp/coli-digest}
ARMS=${ARMS:-"cpu sim ram0"}
TEXT='def main():
    for i in range(10):
        print(i * i)  # squares'
mkdir -p "$DIR" || exit 1
for fx in qwen3_moe qwen2_moe olmoe mixtral glm4_moe minimax_m2 deepseek_v3 deepseek_v3_noqlora demo; do
	for q in bf16 q8 q4; do
		m="$DIR/$fx-$q.coli"
		if [ ! -f "$m" ]; then
			"$COLI" convert "tests/fixtures/$fx" -o "$m" --quant "$q" >/dev/null 2>&1 ||
				{ echo "$fx $q convert-failed"; continue; }
		fi
		for arm in $ARMS; do
			case $arm in
			cpu) flags="--gpu off" ;;
			sim) flags="--gpu sim" ;;
			ram0) flags="--gpu off --ram-gb 0" ;;
			gpu) flags="--gpu 0" ;;
			*) echo "unknown arm $arm" >&2 && exit 2 ;;
			esac
			out="$DIR/$fx-$q-$arm.f32"
			# shellcheck disable=SC2086
			if "$COLI" logits -m "$m" --text "$TEXT" -o "$out" $flags >/dev/null 2>&1; then
				echo "$fx $q $arm $(sha256sum "$out" | cut -c1-16)"
			else
				echo "$fx $q $arm failed"
			fi
			# decode too: 24 greedy steps one token at a time
			# shellcheck disable=SC2086
			if g=$("$COLI" generate -m "$m" -p "$TEXT" -n 24 --temperature 0 $flags 2>/dev/null); then
				echo "$fx $q $arm generate $(printf '%s' "$g" | sha256sum | cut -c1-16)"
			else
				echo "$fx $q $arm generate failed"
			fi
		done
	done
done
