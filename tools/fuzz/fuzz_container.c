/*
 * tools/fuzz/fuzz_container.c — libFuzzer target for the .coli reader: the input
 * becomes a memfd, opened by path (/proc/self/fd/N) like any container, and
 * every table entry the reader returns is touched (including slab and tensor
 * bytes) so a validation gap shows up as an ASan report. Built by
 * tools/fuzz/fuzz.sh with -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, which lets
 * mutated files past the checksums to the structural checks.
 */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/io.h"

static volatile unsigned char g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_container_t *c;
	char path[64];
	size_t n;
	int fd = memfd_create("fuzz.coli", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (coli_io_container_open(path, &c) == 0) {
		for (int k = 1; k <= 6; k++) {
			const unsigned char *s = coli_io_container_section(c, k, &n);

			if (s && n)
				g_sink ^= s[0] ^ s[n - 1];
		}
		for (int i = 0; i < coli_io_container_n_tensors(c); i++) {
			const struct coli_tensor_info *t = coli_io_container_tensor(c, i);
			const unsigned char *p = coli_io_container_tensor_data(c, t);

			g_sink ^= p[0] ^ p[t->bytes - 1] ^ (unsigned char)t->name[0];
			if (coli_io_container_find(c, t->name) != t)
				__builtin_trap(); /* names are unique */
		}
		for (int i = 0; i < coli_io_container_n_expert_layers(c); i++) {
			const struct coli_expert_layer *l = coli_io_container_expert_layer(c, i);

			if (coli_io_container_experts_of(c, l->layer) != l)
				__builtin_trap();
			for (uint32_t e = 0; e < l->n_experts; e++) {
				const unsigned char *p = coli_io_container_slab_data(c, i, e);

				g_sink ^= p[l->gate_off] ^ p[l->up_off] ^ p[l->down_off] ^
				          p[l->slab_bytes - 1];
				g_sink ^= (unsigned char)coli_io_container_slab_xxh64(c, i, e);
			}
		}
		coli_io_container_verify(c, NULL, NULL);
		coli_io_container_close(c);
	}
	close(fd);
	return 0;
}
