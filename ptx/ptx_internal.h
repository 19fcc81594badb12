/*
 * ptx/ptx_internal.h — the slice of the CUDA driver API coli uses, declared
 * here (no cuda.h needed to build) and resolved from libcuda.so.1 at run time
 * by ptx/driver.c. Handles are opaque pointers; CUdeviceptr is 64-bit.
 */
#ifndef COLI_PTX_INTERNAL_H
#define COLI_PTX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ptx/kernels_abi.h"

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef unsigned long long CUdeviceptr;

/* The split kernels' scratch (partials) and counters: one of each a device,
 * shared by every split launch since the device has one compute stream. */
#define DENSE_SCRATCH_FLOATS ((size_t)16 << 20) /* 64 MiB */
#define DENSE_COUNTERS       8192

#define CUDA_SUCCESS                                    0
#define CUDA_ERROR_INVALID_VALUE                        1
#define CUDA_ERROR_NOT_READY                            600
#define CUDA_ERROR_NOT_SUPPORTED                        801
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED       712
#define CU_JIT_INFO_LOG_BUFFER                          3
#define CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES               4
#define CU_JIT_ERROR_LOG_BUFFER                         5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES              6
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT        16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR    75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR    76
#define CU_DEVICE_ATTRIBUTE_PCI_BUS_ID                  33
#define CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID               34
#define CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID               50
#define CU_STREAM_NON_BLOCKING                          1
#define CU_STREAM_WAIT_VALUE_EQ                         1
#define CU_EVENT_DEFAULT                                0
#define CU_EVENT_DISABLE_TIMING                         2
#define CU_EVENT_RECORD_EXTERNAL                        1
#define CU_MEMHOSTALLOC_PORTABLE                        1
#define CU_MEMHOSTALLOC_DEVICEMAP                       2
#define CU_MEMHOSTREGISTER_PORTABLE                     1
#define CU_MEMHOSTREGISTER_DEVICEMAP                    2
#define CU_STREAM_CAPTURE_MODE_RELAXED                  2
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig, CUlaunchAttribute:
 * an id, padding to 8 bytes, a 64-byte value union). */
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef struct {
	int id;
	char pad[4];
	union {
		char pad[64];
		int i; /* programmaticStreamSerializationAllowed */
	} value;
} CUlaunchAttribute;
typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

/* The driver entry points, filled by coli_cu_load(). */
struct coli_cu {
	CUresult (*Init)(unsigned int);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
	CUresult (*CtxCreate)(CUcontext *, unsigned int, CUdevice);
	CUresult (*CtxDestroy)(CUcontext);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxSynchronize)(void);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned int, int *, void **);
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*FuncSetAttribute)(CUfunction, int, int);
	CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemHostRegister)(void *, size_t, unsigned int);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUresult (*MemHostUnregister)(void *);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned int);
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*EventQuery)(CUevent);
	/* optional (NULL: no stream waits on the host) */
	CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
	                         unsigned int, unsigned int, unsigned int, CUstream, void **,
	                         void **);
	CUresult (*GetErrorName)(CUresult, const char **);
	/* graphs (optional entries: have_graphs says whether all resolved) */
	CUresult (*StreamBeginCapture)(CUstream, int);
	CUresult (*StreamEndCapture)(CUstream, CUgraph *);
	CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(CUgraphExec, CUstream);
	CUresult (*GraphExecDestroy)(CUgraphExec);
	CUresult (*GraphDestroy)(CUgraph);
	CUresult (*EventRecordWithFlags)(CUevent, CUstream, unsigned);
	int have_graphs;
	/* optional (CUDA 12): programmatic dependent launch; NULL if absent */
	CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
};

/* Loads libcuda.so.1 once and resolves every entry; 0 or -ENODEV (why set). */
int coli_cu_load(const struct coli_cu **out, const char **why);
/* Maps a CUresult to -errno and logs "coli: <what>: CUDA_ERROR_x" once per call. */
int coli_cu_check(CUresult r, const char *what);

/* One device (ptx/gpu.c opens it, ptx/dense/gpu_dense.c and ptx/attn/gpu_attn.c add the
 * dense and the attention kernels). */
#define MAX_JOBS   COLI_GPU_MAX_JOBS /* GEMV jobs per launch (experts x matrices) */
#define JOB_RING   ((size_t)4 << 20) /* page-locked ring the job tables travel through */
#define JOB_SEGS   4
#define N_MARKS    8
#define JIT_LOG_SZ 8192

struct coli_gpu {
	const struct coli_cu *cu;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod, mod_dense, mod_route, mod_attn, mod_attn_prefill, mod_gemm, mod_kinds,
	    mod_mla, mod_kquant, mod_kquant_gemm;
	CUstream stream; /* compute: kernels, activations, outputs */
	CUstream copy;   /* staging copies of streamed slabs (ptx/gpu_stream.c coli_gpu_stage_*) */
	int capturing;   /* the stream is being captured: launches will be replayed */
	int n_stage;
	CUevent *st_full, *st_free; /* per staging slot: copy landed / last reader done */
	CUfunction f_gemv[COLI_DTYPE_Q6_K + 1];     /* indexed by enum coli_dtype */
	CUfunction f_gemv_inl[COLI_DTYPE_Q6_K + 1]; /* the same, job table in the parameters */
	/* tensor-core GEMM (ptx/expert/gemm.cu; block types ptx/expert/kquant_gemm.cu),
	 * same index */
	CUfunction f_gemm[COLI_DTYPE_Q6_K + 1];
	CUfunction f_gemm_inl[COLI_DTYPE_Q6_K + 1]; /* the same, job table in the parameters */
	int gemm_bn;         /* forced token tile (coli_gpu_gemm_tile), 0: by the runs */
	int gemm_wide_no;    /* the GPU refused the wide q8/q4 tile's shared memory */
	int gemm_kq_wide_no; /* ... or the block types' */
	CUfunction f_silu, f_actq, f_siluq, f_pull, f_swiglu_oai, f_pair_bias;
	CUfunction f_embed_kq; /* ptx/expert/kquant.cu: embedding rows of GGUF's block types */
	CUfunction f_rmsnorm, f_add_bias, f_add, f_rope, f_embed, f_moe_acc, f_gated;
	/* attention by KV mode (ptx/attn/kv_rows.cuh: f32, bf16, q8, q8 keys bf16 values) */
	CUfunction f_attn[COLI_GPU_KV_MODES];
	CUfunction f_argmax, f_gather;
	CUfunction f_attn_chunks[COLI_GPU_KV_MODES][4];  /* coli_attn_chunks_{32,..,256}[_mode] */
	CUfunction f_attn_prefill[COLI_GPU_KV_MODES][2]; /* coli_attn_prefill_{64,128}[_mode] */
	CUfunction f_attn_tc[COLI_GPU_KV_MODES][2];      /* coli_attn_tc_{64,128}_mode (not f32) */
	CUfunction f_attn_tcp[COLI_GPU_KV_MODES][2];     /* coli_attn_tcp_{64,128}_mode (not f32) */
	int tc_held[COLI_GPU_KV_MODES][2]; /* coli_attn_tc's CTAs an SM holds at once */
	int attn_ways;                     /* coli_gpu_attn_ways: CTAs sharing a decode fold */
	int attn_prefill;                  /* coli_gpu_attn_prefill's level (tests, bench) */
	int dgemm_tiled;                   /* coli_gpu_dense_tiled's mode (tests, bench) */
	unsigned open_flags;               /* coli_gpu_open's flags (fault injection) */
	CUfunction f_dgemv_plan[COLI_GPU_MAX_S]; /* coli_dgemv_f32_plan_{1..4} */
	CUfunction f_route, f_moe_plan, f_qk_rope, f_route_plan;
	CUfunction f_route_sig, f_rope_part; /* ptx/dense/kinds.cu (ptx/dense/gpu_kinds.c) */
	CUfunction f_mla[3][2], f_mla_comb,
	    f_mla_prep;             /* ptx/attn/mla.cu [kv type][x3], combine, prep */
	CUfunction f_mla_dec[3][3]; /* ptx/attn/mla_decode.cuh [kv type][bf16 terms - 1] */
	/* job tables: a ring of page-locked host memory the device maps and the
	 * kernels read in place (no copy engine involved) */
	unsigned char *ring_host;
	CUdeviceptr ring_dev; /* the same memory, as the device sees it */
	/* the word the compute stream waits on for the host (coli_gpu_host_wait):
	 * page-locked, mapped; NULL where the driver has no stream waits */
	volatile uint32_t *host_word;
	CUdeviceptr host_word_dev;
	size_t ring_seg, ring_off; /* the job ring's segment and offset in it (gpu_mem.c) */
	/* host regions this context registered (it unregisters them), mapped
	 * where d != 0 (coli_gpu_upload_async pulls from those) */
	struct coli_gpu_reg {
		const char *p;
		size_t n;
		CUdeviceptr d;
	} regs[256];
	int n_regs;
	CUevent ring_left[JOB_SEGS];           /* recorded when the stream left segment i */
	CUfunction f_dgemv[5][COLI_GPU_MAX_S]; /* dense GEMV [f32 bf16 q8_0 q4_0 q4_0h][S - 1] */
	CUfunction f_dgemm_few[2][2];          /* [q8_0 q4_0][chunks of 8, 16 tokens] */
	CUfunction f_dgemv_wide[2];            /* [f32 bf16], S = 16: prefill, joined splits */
	CUfunction f_dgemm_f32[8];             /* prefill routers, tiled: [units a lane - 1] */
	int sm_count;
	CUdeviceptr
	    scratch; /* float [DENSE_SCRATCH_FLOATS]: split partials (gpu_dense.c, gpu_mla.c) */
	CUdeviceptr counts; /* unsigned [DENSE_COUNTERS], zero between launches */
	CUdeviceptr gjobs;  /* struct coli_gpu_gemm_job [MAX_JOBS] */
	/* [MAX_JOBS]: the caller's jobs by tile, wide first, + tile0, tile */
	struct coli_gpu_gemm_job *gjobs_host;
	CUevent marks[N_MARKS];
	CUevent point; /* coli_gpu_point */
	int cc_major;  /* compute capability */
	int pdl;       /* launches with programmatic stream serialization (coli_gpu_launch) */
	char name[128];
};

/* CUresult -> -errno, returning from the calling function on failure. */
#define CK(call, what)                                                                             \
	do {                                                                                       \
		int rc_ = coli_cu_check((call), (what));                                           \
		if (rc_)                                                                           \
			return rc_;                                                                \
	} while (0)

/* The context is made current on the calling thread before each call: the
 * engine may drive a device from different threads over its life. */
#define CUR(g) CK((g)->cu->CtxSetCurrent((g)->ctx), "cuCtxSetCurrent")

/* The dense kernels' handles and their scratch (at open; freed at close). */
int coli_gpu_dense_functions(struct coli_gpu *g);
/* The attention kernels' handles, a set a KV mode (at open; ptx/attn/gpu_attn.c). */
int coli_gpu_attn_functions(struct coli_gpu *g);
/* Queue a job table's copy through the page-locked ring (ptx/gpu_mem.c). */
int coli_gpu_job_table(struct coli_gpu *g, const void *jobs, size_t bytes, uint64_t *dptr);
/* Queue an n-byte copy s -> d (n % 4 == 0) done by the SMs (coli_pull) on the
 * compute stream; one side device-mapped host memory (ptx/gpu_mem.c). */
int coli_gpu_pull(struct coli_gpu *g, CUdeviceptr d, CUdeviceptr s, size_t n);
void coli_gpu_dense_release(struct coli_gpu *g);

/* Queue kernel f on the compute stream: with g->pdl through cuLaunchKernelEx
 * and programmatic stream serialization (ptx/common/pdl.cuh), else cuLaunchKernel.
 * 0 or -errno (logged with what). */
int coli_gpu_launch(struct coli_gpu *g, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                    unsigned bx, unsigned shmem, void **args, const char *what);

/* The embedded PTX modules (build/ptx/<name>_ptx.c, made from ptx/<part>/<name>.cu):
 * the compute_80 build, and the compute_90 one loaded on sm_90+. */
extern const char coli_ptx_kernels[], coli_ptx_kernels_90[];
extern const char coli_ptx_dense[], coli_ptx_dense_90[];
extern const char coli_ptx_attention[], coli_ptx_attention_90[];
extern const char coli_ptx_attn_prefill[], coli_ptx_attn_prefill_90[];
extern const char coli_ptx_gemm[], coli_ptx_gemm_90[];
extern const char coli_ptx_kinds[], coli_ptx_kinds_90[];
extern const char coli_ptx_mla[], coli_ptx_mla_90[];
extern const char coli_ptx_kquant[], coli_ptx_kquant_90[];
extern const char coli_ptx_kquant_gemm[], coli_ptx_kquant_gemm_90[];
extern const char coli_ptx_route[], coli_ptx_route_90[];

/* ptx/dense/gpu_kinds.c: the handles of ptx/dense/kinds.cu's kernels (at open). */
int coli_gpu_kinds_functions(struct coli_gpu *g);
/* ptx/attn/gpu_mla.c: the handles of ptx/attn/mla.cu's kernels (at open). */
int coli_gpu_mla_functions(struct coli_gpu *g);

#endif
