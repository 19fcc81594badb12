/*
 * io/container_format.c — the arithmetic both sides of the .coli container
 * agree on: matrix bytes per dtype, the slab layout of an expert layer, and
 * the encoding of tensor and expert-layer table entries. The writer uses it
 * to lay a file out; the reader recomputes it to check what a file claims.
 *
 * Slab of one (layer, expert), offsets relative to the slab's start:
 *
 *   0          gate  [inter x hidden]   mat_bytes(dtype, inter, hidden)
 *   up_off     up    [inter x hidden]   64-byte aligned
 *   down_off   down  [hidden x inter]   64-byte aligned; its dtype may differ
 *                                        (coli_io_expert_down_dtype)
 *   ...        zero padding up to slab_bytes, a multiple of COLI_SLAB_ALIGN
 *
 * Each matrix is cpu/cpu.h's format: row-major values, or for Q8_0/Q4_0 the
 * quant plane then the fp16 scale plane. Every size is computed in uint64
 * with overflow checks, since the reader feeds it numbers from the file.
 */
#include <errno.h>
#include <string.h>

#include "io/io_internal.h"

int io_mat_bytes(uint32_t dtype, uint64_t rows, uint64_t cols, uint64_t *out)
{
	uint64_t n, q, s;

	if (!rows || !cols)
		return -EINVAL;
	if (__builtin_mul_overflow(rows, cols, &n))
		return -EOVERFLOW;
	switch (dtype) {
	case COLI_DTYPE_F32:
		return __builtin_mul_overflow(n, 4, out) ? -EOVERFLOW : 0;
	case COLI_DTYPE_F16:
	case COLI_DTYPE_BF16:
		return __builtin_mul_overflow(n, 2, out) ? -EOVERFLOW : 0;
	case COLI_DTYPE_Q8_0:
	case COLI_DTYPE_Q4_0:
		if (cols % COLI_QBLOCK)
			return -EINVAL;
		q = dtype == COLI_DTYPE_Q8_0 ? n : n / 2; /* cols is even */
		s = n / COLI_QBLOCK * 2;                  /* one fp16 scale per block */
		return __builtin_add_overflow(q, s, out) ? -EOVERFLOW : 0;
	default: { /* GGUF's block types: rows of whole blocks */
		unsigned be, bb;

		if (coli_dtype_block((enum coli_dtype)dtype, &be, &bb) || cols % be)
			return -EINVAL;
		return __builtin_mul_overflow(n / be, (uint64_t)bb, out) ? -EOVERFLOW : 0;
	}
	}
}

int io_tensor_bytes(uint32_t dtype, int ndim, const uint64_t *shape, uint64_t *out)
{
	uint64_t rows = 1;

	if (ndim < 1 || ndim > 4)
		return -EINVAL;
	for (int i = 0; i < ndim - 1; i++)
		if (__builtin_mul_overflow(rows, shape[i], &rows))
			return -EOVERFLOW;
	return io_mat_bytes(dtype, rows, shape[ndim - 1], out);
}

const char *io_section_name(uint32_t kind)
{
	switch (kind) {
	case COLI_SECTION_CONFIG:
		return "config";
	case COLI_SECTION_TOKENIZER:
		return "tokenizer";
	case COLI_SECTION_CHAT_TEMPLATE:
		return "chat-template";
	case COLI_SECTION_HF_CONFIG:
		return "hf-config";
	case COLI_SECTION_GEN_CONFIG:
		return "generation-config";
	case COLI_SECTION_TOKENIZER_CONFIG:
		return "tokenizer-config";
	case CT_SECTION_TENSORS:
		return "tensor-table";
	case CT_SECTION_EXPERT_LAYERS:
		return "expert-layer-table";
	case CT_SECTION_SLAB_XXH:
		return "slab-checksums";
	}
	return "unknown";
}

int coli_io_slab_layout(struct coli_expert_layer *l)
{
	uint64_t gate, down, end;
	int rc;

	if (!l->hidden || !l->inter)
		return -EINVAL;
	rc = io_mat_bytes(l->dtype, l->inter, l->hidden, &gate);
	if (rc)
		return rc;
	rc = io_mat_bytes(coli_io_expert_down_dtype(l), l->hidden, l->inter, &down);
	if (rc)
		return rc;
	/* hidden, inter < 2^32 so none of these sums can overflow uint64 */
	l->gate_off = 0;
	l->up_off = align_up(gate, CT_TENSOR_ALIGN);
	l->down_off = align_up(l->up_off + gate, CT_TENSOR_ALIGN);
	end = l->down_off + down;
	l->slab_bytes = align_up(end, COLI_SLAB_ALIGN);
	return 0;
}

void io_tensor_encode(unsigned char *e, const struct coli_tensor_info *t)
{
	memset(e, 0, CT_TENSOR_ENTRY);
	memcpy(e + TE_NAME, t->name, strnlen(t->name, COLI_TENSOR_NAME_MAX - 1));
	put32(e + TE_DTYPE, (uint32_t)t->dtype);
	put32(e + TE_NDIM, (uint32_t)t->ndim);
	for (int i = 0; i < 4; i++)
		put64(e + TE_SHAPE + 8 * i, i < t->ndim ? t->shape[i] : 0);
	put64(e + TE_OFFSET, t->offset);
	put64(e + TE_BYTES, t->bytes);
	put64(e + TE_XXH, t->xxh64);
}

void io_layer_encode(unsigned char *e, const struct coli_expert_layer *l)
{
	memset(e, 0, CT_LAYER_ENTRY);
	put32(e + LE_LAYER, l->layer);
	put32(e + LE_N_EXPERTS, l->n_experts);
	put32(e + LE_DTYPE, (uint32_t)l->dtype);
	put32(e + LE_DOWN_DTYPE, l->down_kind);
	put32(e + LE_HIDDEN, l->hidden);
	put32(e + LE_INTER, l->inter);
	put64(e + LE_OFFSET, l->offset);
	put64(e + LE_SLAB_BYTES, l->slab_bytes);
	put64(e + LE_GATE_OFF, l->gate_off);
	put64(e + LE_UP_OFF, l->up_off);
	put64(e + LE_DOWN_OFF, l->down_off);
}
