#!/bin/sh
# make ptx-check: compile every ptx/*.cu to PTX and assemble it with ptxas for
# the GPUs coli targets (sm_80, sm_90; the compute_90 build for sm_90), so a
# kernel that stops assembling is caught on machines without a GPU. Usage: tools/ptx_check.sh NVCC NVCC_FLAGS FILE.cu...
NVCC=$1
FLAGS=$2
shift 2
if [ -z "$NVCC" ]; then
	echo "ptx-check: no nvcc on this machine; skipped"
	exit 0
fi
if [ $# -eq 0 ]; then
	echo "ptx-check: no kernels in ptx/ yet"
	exit 0
fi
PTXAS=$(dirname "$NVCC")/ptxas
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
for cu in "$@"; do
	base=$(basename "$cu" .cu)
	if ! "$NVCC" $FLAGS -o "$tmp/$base.ptx" "$cu"; then
		echo "ptx-check: $cu: nvcc failed"; rc=1; continue
	fi
	for sm in sm_80 sm_90; do
		if "$PTXAS" -arch=$sm -o "$tmp/$base.$sm.cubin" "$tmp/$base.ptx"; then
			printf '  %-28s %s ok\n' "$cu" $sm
		else
			echo "ptx-check: $cu: ptxas -arch=$sm failed"; rc=1
		fi
	done
	# the compute_90 build (programmatic dependent launch), for sm_90
	if ! "$NVCC" $(echo "$FLAGS" | sed 's/compute_80/compute_90/') -o "$tmp/$base.90.ptx" "$cu"; then
		echo "ptx-check: $cu: nvcc (compute_90) failed"; rc=1; continue
	fi
	if "$PTXAS" -arch=sm_90 -o "$tmp/$base.90.cubin" "$tmp/$base.90.ptx"; then
		printf '  %-28s %s ok\n' "$cu" "sm_90 (compute_90 build)"
	else
		echo "ptx-check: $cu: ptxas -arch=sm_90 (compute_90 build) failed"; rc=1
	fi
done
exit $rc
