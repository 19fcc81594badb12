/*
 * ptx/gpu_stream.c — a device's streams and events (ptx/gpu.c opens the
 * device and creates them): synchronizing the compute stream, capturing what
 * it is given into graphs and replaying them, the staging slots that order
 * the copy stream against the compute stream per slot, the profiling marks,
 * the wait point the host waits for instead of the whole stream, and the
 * host-signalled stream waits.
 */
#include <errno.h>
#include <stdlib.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
int coli_gpu_sync(coli_gpu_t *g)
{
	CUR(g);
	CK(g->cu->StreamSynchronize(g->stream), "cuStreamSynchronize");
	return 0;
}

/* Graphs: what the compute stream is given between capture_begin and
 * capture_end is recorded, not run (relaxed mode: other threads may use the
 * driver meanwhile), and instantiated into one executable graph that
 * graph_launch replays with the parameters it was captured with. */
int coli_gpu_capture_begin(coli_gpu_t *g)
{
	if (!g->cu->have_graphs)
		return -ENOTSUP;
	CUR(g);
	CK(g->cu->StreamBeginCapture(g->stream, CU_STREAM_CAPTURE_MODE_RELAXED),
	   "cuStreamBeginCapture");
	g->capturing = 1;
	return 0;
}

int coli_gpu_capture_end(coli_gpu_t *g, uint64_t *graph)
{
	CUgraph gr = NULL;
	CUgraphExec ex = NULL;
	CUresult r;

	*graph = 0;
	CUR(g);
	g->capturing = 0;
	r = g->cu->StreamEndCapture(g->stream, &gr);
	if (r == CUDA_SUCCESS && gr)
		r = g->cu->GraphInstantiate(&ex, gr, 0);
	if (gr)
		g->cu->GraphDestroy(gr);
	CK(r, "cuStreamEndCapture / cuGraphInstantiate");
	*graph = (uint64_t)(uintptr_t)ex;
	return 0;
}

int coli_gpu_graph_launch(coli_gpu_t *g, uint64_t graph)
{
	CUR(g);
	CK(g->cu->GraphLaunch((CUgraphExec)(uintptr_t)graph, g->stream), "cuGraphLaunch");
	return 0;
}

void coli_gpu_graph_free(coli_gpu_t *g, uint64_t graph)
{
	if (graph && g->cu->CtxSetCurrent(g->ctx) == CUDA_SUCCESS)
		g->cu->GraphExecDestroy((CUgraphExec)(uintptr_t)graph);
}

/* ---- staging slots: two streams ordered by events ----
 * A streamed slab is copied on the copy stream while the compute stream runs
 * whatever it has queued (the dense part of a layer, another layer's
 * experts). Per slot, st_full says the copy landed (the compute stream waits
 * on it before the launches that read the slot) and st_free says the last
 * launch reading it is done (the copy stream waits on it before writing the
 * slot again). Neither wait blocks the host. */
int coli_gpu_stage_init(coli_gpu_t *g, int n)
{
	CUR(g);
	g->st_full = calloc((size_t)n, sizeof(CUevent));
	g->st_free = calloc((size_t)n, sizeof(CUevent));
	if (!g->st_full || !g->st_free)
		return -ENOMEM;
	for (int i = 0; i < n; i++, g->n_stage = i) {
		CK(g->cu->EventCreate(&g->st_full[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
		CK(g->cu->EventCreate(&g->st_free[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	}
	g->n_stage = n;
	return 0;
}

int coli_gpu_stage_copy(coli_gpu_t *g, int slot, uint64_t dst, const void *src, size_t n)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->StreamWaitEvent(g->copy, g->st_free[slot], 0), "cuStreamWaitEvent");
	CK(g->cu->MemcpyHtoDAsync(dst, src, n, g->copy), "cuMemcpyHtoDAsync(stage)");
	CK(g->cu->EventRecord(g->st_full[slot], g->copy), "cuEventRecord");
	return 0;
}

int coli_gpu_stage_use(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->StreamWaitEvent(g->stream, g->st_full[slot], 0), "cuStreamWaitEvent");
	return 0;
}

int coli_gpu_stage_fence(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventRecord(g->st_full[slot], g->copy), "cuEventRecord");
	return 0;
}

int coli_gpu_stage_done(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventRecord(g->st_free[slot], g->stream), "cuEventRecord");
	return 0;
}

int coli_gpu_stage_landed(coli_gpu_t *g, int slot)
{
	CUresult r;

	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	r = g->cu->EventQuery(g->st_full[slot]);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	CK(r, "cuEventQuery");
	return 1;
}

int coli_gpu_mark(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= N_MARKS)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventRecord(g->marks[slot], g->stream), "cuEventRecord");
	return 0;
}

/* The host's wait point: inside a capture an event record node of the graph
 * (each replay records it), else a plain record. */
int coli_gpu_point(coli_gpu_t *g)
{
	CUR(g);
	if (g->capturing)
		CK(g->cu->EventRecordWithFlags(g->point, g->stream, CU_EVENT_RECORD_EXTERNAL),
		   "cuEventRecordWithFlags");
	else
		CK(g->cu->EventRecord(g->point, g->stream), "cuEventRecord");
	return 0;
}

int coli_gpu_point_wait(coli_gpu_t *g)
{
	CUR(g);
	CK(g->cu->EventSynchronize(g->point), "cuEventSynchronize");
	return 0;
}

/* The compute stream waits until the host word equals seq (equality: the
 * word wraps after 2^32 signals, and a wait never has more than one signal
 * outstanding). */
int coli_gpu_host_wait(coli_gpu_t *g, uint32_t seq)
{
	if (!g->host_word)
		return -ENOTSUP;
	CUR(g);
	CK(g->cu->StreamWaitValue32(g->stream, g->host_word_dev, seq, CU_STREAM_WAIT_VALUE_EQ),
	   "cuStreamWaitValue32");
	return 0;
}

/* A store the device sees over the bus; release: what the host wrote before
 * (rows the ops behind the wait read) is visible first (x86 keeps stores in
 * order, the fence keeps the compiler from moving them) */
void coli_gpu_host_signal(coli_gpu_t *g, uint32_t seq)
{
	if (g->host_word)
		__atomic_store_n(g->host_word, seq, __ATOMIC_RELEASE);
}

int coli_gpu_has_host_wait(const coli_gpu_t *g)
{
	return g->host_word != NULL;
}

int coli_gpu_elapsed_ms(coli_gpu_t *g, int from_slot, int to_slot, float *ms)
{
	if (from_slot < 0 || from_slot >= N_MARKS || to_slot < 0 || to_slot >= N_MARKS)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventSynchronize(g->marks[to_slot]), "cuEventSynchronize");
	CK(g->cu->EventElapsedTime(ms, g->marks[from_slot], g->marks[to_slot]),
	   "cuEventElapsedTime");
	return 0;
}

#endif
