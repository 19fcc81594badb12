/*
 * core/forward/dense.h — where the dense part runs: on one device, on
 * several (--split layers: each a contiguous range of layers), or on the
 * CPU (n_dd 0). core/forward/dense_dev.c fills it (coli_dense_dev_open) and
 * empties it (coli_dense_dev_close); the placement and the scheduler read
 * dd_of and dd_dev through coli_dense_dev_of and coli_dense_dev_holds
 * (core/place/vram.c), which do not see struct coli_dense_dev.
 */
#ifndef COLI_CORE_FORWARD_DENSE_H
#define COLI_CORE_FORWARD_DENSE_H

#include <stdint.h>

#include "core/place/vram.h"

struct coli_dense {
	struct coli_dense_dev *dd; /* dense part on a device (core/forward/forward_dev.c), or NULL;
	                            * with several (layer split), the first: each
	                            * layer's is coli_dense_dev_at */
	struct coli_dense_dev *dds[COLI_MAX_DEVS]; /* each device's range of layers */
	int n_dd;
	signed char *dd_of; /* [n_layers] index in dds of the layer's dense device */
	struct coli_dev *dd_dev[COLI_MAX_DEVS]; /* dds[i]'s device, for the parts that do not
	                                         * see struct coli_dense_dev (place, moe) */
	uint32_t tail_seq; /* host waits queued on the dense device so far (core/forward/
	                    * layer_host.c's tail ahead) */
};

#endif
