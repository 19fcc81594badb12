/*
 * tools/fuzz/fuzz_model.c — libFuzzer target for a model file all the way in: the
 * input becomes a memfd opened by path like any .coli, then coli_engine_open
 * (container, config, tensor binding, tiers, scratch; CPU only), one forward
 * step over two tokens and a close. Built by tools/fuzz/fuzz.sh with
 * -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, so mutated bytes pass the
 * checksums and reach the structural checks behind them; a bad file must be
 * refused with a message, never crash, leak or read out of bounds.
 * Seeds: tools/fuzz/seed/fuzz_model.seed.sh (a converted fixture, ~0.2 MB).
 *
 * fuzz-max-len: 1048576
 */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/coli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct coli_opts o;
	coli_engine_t *e;
	char path[64], err[512];
	int fd = memfd_create("fuzz.coli", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (coli_opts_init(&o, err, sizeof(err)) ||
	    coli_opts_set(&o, "--gpu", "off", err, sizeof(err)) ||
	    coli_opts_set(&o, "--usage", "off", err, sizeof(err)))
		__builtin_trap(); /* the environment the fuzzer runs in is ours */
	o.threads = 1;
	o.ctx = 16;
	if (coli_engine_open(path, &o, &e, err, sizeof(err)) == 0) {
		const int ids[2] = {1, 2};
		int next;

		(void)coli_engine_forward_argmax(e, ids, 2, &next);
		coli_engine_close(e);
	} else if (!err[0]) {
		__builtin_trap(); /* a refusal always says why */
	}
	close(fd);
	return 0;
}
