/*
 * core/place/vram.h — the devices and the VRAM expert tier: the devices
 * --gpu opened (core/engine.c opens and closes them, through core/dev), each
 * one's share of the MoE work (struct coli_dev_slot) and where every expert
 * lives. core/place/vram.c owns the rest: coli_moe_dev_place fills it at
 * open, coli_moe_dev_adapt moves experts between tokens,
 * coli_moe_dev_release frees it, coli_vram_device_drop leaves a device out
 * (declared in core/core_internal.h). The MoE part (core/moe/moe_dev.c)
 * issues each layer's device work through the slots.
 */
#ifndef COLI_CORE_PLACE_VRAM_H
#define COLI_CORE_PLACE_VRAM_H

#include <stddef.h>
#include <stdint.h>

#define COLI_MAX_DEVS 8

struct coli_engine;

/* One device's share of the MoE work: made by core/place/vram.c, used per
 * layer by core/moe/moe_dev.c. Device addresses are uint64_t; s* are host
 * staging buffers of the same shapes. */
struct coli_dev_slot {
	struct coli_dev *dev;
	size_t budget, used;      /* VRAM for resident expert slabs, bytes */
	int n_experts;            /* resident */
	int pmax;                 /* pairs the buffers hold: tmax * top_k */
	uint64_t xq, xd, xqs, xf; /* pair activations [P][H] (+ scales, sums) or f32 */
	uint64_t g, u, h;         /* [P][I] f32 */
	uint64_t hq, hd, hqs;     /* h quantized */
	uint64_t y;               /* [P][H] expert outputs */
	uint64_t xbias;           /* gpt-oss (cfg.expert_bias): [expert layer] of gate, up
	                           * [E][I] and down [E][H] f32, uploaded at open; 0
	                           * without (coli_moe_dev_xbias) */
	/* host staging of the pair activations and outputs: one page-locked region
	 * (mem/ registers it with every device), so copies are truly asynchronous */
	void *host;
	size_t host_bytes;
	int8_t *sx_q;
	float *sx_d, *sx_f, *sy;
	int32_t *sx_s;
	int32_t *sx_tok;                 /* [P] each row's token, for a device-side gather */
	uint64_t tok;                    /* the same on the device */
	struct coli_gpu_gemv_job *jobs;  /* runs of <= COLI_GPU_MAX_S pairs */
	struct coli_gpu_gemm_job *gjobs; /* longer runs (prefill): tensor-core GEMM */
	struct dev_run {
		int expert, pair0, n, row0;
		int stage;     /* staging slot, -1 for a resident expert */
		int tail;      /* its down part is still to copy (wave_compute) */
		uint64_t slab; /* resident slab or staging slot */
	} * runs;              /* this layer's experts on the device */
	int n_runs, P;
	/* the issue's first part (moe_dev.c issue_begin): its first wave's end
	 * and cap; early: that wave's copies went first; on_dev: the pairs'
	 * rows are on this device (the layer call's dev_rows); ahead: queued already by
	 * coli_moe_dev_copy_ahead, which returned ahead_rc */
	int r1, cap, early, on_dev, ahead, ahead_rc;
	int direct; /* this layer's gate and up read the tokens' rows in ml->dev_rows
	             * (one pair an expert: no gather) */
	/* streaming: RAM-tier slabs copied into VRAM staging slots, a small LRU
	 * cache tagged (layer, expert); copies run on the device's copy stream */
	uint64_t stage; /* n_stage slots of stage_bytes */
	int n_stage;
	size_t stage_bytes;
	struct dev_stage {
		int l, ex;     /* what the slot holds (or is receiving); l = -1: nothing */
		uint64_t used; /* st_clock of the last round that claimed it (this
		                  round's: not a victim) */
		uint64_t last; /* st_tick of its last copy or reader: the LRU order */
	} * st;
	uint64_t st_clock, st_tick;
	uint64_t streamed_bytes; /* this layer */
	double t_issue;          /* when this layer's issue began (s) */
};
struct coli_vram {
	struct coli_dev *devs[COLI_MAX_DEVS]; /* the devices --gpu names */
	int n_devs;
	struct coli_dev_slot slot[COLI_MAX_DEVS]; /* devs[d]'s share of the MoE work */
	signed char *where;                       /* [n_layers][n_experts]: device index, -1 host */
	uint64_t *dev_slab; /* [n_layers][n_experts]: device address of the slab */
	uint64_t adapt_at;  /* token count of the next VRAM adaptation round */
	/* the VRAM adaptation moved expert ex of layer l to device address addr
	 * (0: out of VRAM): vram.c calls the hook core/engine.c installs at open
	 * (the dense device's table of what it may plan) */
	int (*slab_moved)(struct coli_engine *e, int l, int ex, uint64_t addr);
};

#endif
