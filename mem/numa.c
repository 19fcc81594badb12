/*
 * mem/numa.c — where engine memory and threads live (--numa-bind).
 *
 *   off         no policy: first touch decides, threads float
 *   interleave  pages spread over all nodes, threads float (bandwidth-bound
 *               machines where one node's DRAM is not enough)
 *   N           node N: arenas preferred there, threads run on its CPUs
 *   auto        the node of the first NVIDIA GPU, because host->device copies
 *               and cuMemHostRegister'd staging are fastest from its own
 *               socket; without a GPU the node of the CPU we run on. A
 *               one-node machine resolves to "any" (nothing to choose).
 *               (The engine asks first for the node of the GPU it will use
 *               first, by CUDA's numbering: core/engine.c numa_bind; this
 *               is its answer when CUDA cannot say.)
 *
 * The GPU's node comes from sysfs (/sys/bus/pci/devices/X/{vendor,class,
 * numa_node}), which needs no driver and no hwloc; -1 there (firmware did not
 * say) counts as "unknown" and falls through to the CPU's node.
 */
#include <dirent.h>
#include <errno.h>
#include <numa.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/mem.h"

#define PCI_DIR       "/sys/bus/pci/devices"
#define NVIDIA_VENDOR 0x10de

static long read_hex(const char *dir, const char *dev, const char *file)
{
	char p[512], buf[64];
	FILE *f;
	long v = -1;

	snprintf(p, sizeof(p), "%s/%s/%s", dir, dev, file);
	f = fopen(p, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 0);
	fclose(f);
	return v;
}

/* Node of the first NVIDIA display/3D controller (PCI class 0x03xxxx), in
 * sysfs name order (= bus order); -1 if none or unknown. */
static int gpu_node(char *dev_out, size_t len)
{
	DIR *d = opendir(PCI_DIR);
	struct dirent *de;
	char best[256] = "";
	int node = -1;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (read_hex(PCI_DIR, de->d_name, "vendor") != NVIDIA_VENDOR ||
		    (read_hex(PCI_DIR, de->d_name, "class") >> 16) != 0x03)
			continue;
		if (best[0] && strcmp(de->d_name, best) > 0)
			continue;
		snprintf(best, sizeof(best), "%s", de->d_name);
		node = (int)read_hex(PCI_DIR, de->d_name, "numa_node");
	}
	closedir(d);
	if (node >= 0)
		snprintf(dev_out, len, "%s", best);
	return node;
}

int coli_mem_pci_node(unsigned domain, unsigned bus, unsigned device)
{
	char name[32];
	long n;

	if (coli_mem_numa_nodes() <= 1)
		return -1;
	snprintf(name, sizeof(name), "%04x:%02x:%02x.0", domain & 0xffff, bus & 0xff,
	         device & 0x1f);
	n = read_hex(PCI_DIR, name, "numa_node");
	return n >= 0 ? (int)n : -1;
}

int coli_mem_numa_nodes(void)
{
	if (numa_available() < 0)
		return 1;
	return numa_num_configured_nodes() > 0 ? numa_num_configured_nodes() : 1;
}

int coli_mem_numa_resolve(const char *spec, int *node, char *why, size_t whylen)
{
	char dev[256];
	char *end;
	long n;
	int cpu;

	if (!spec || !*spec || !strcmp(spec, "off")) {
		*node = COLI_MEM_NODE_ANY;
		snprintf(why, whylen, "off");
		return 0;
	}
	if (!strcmp(spec, "interleave")) {
		*node = coli_mem_numa_nodes() > 1 ? COLI_MEM_NODE_INTERLEAVE : COLI_MEM_NODE_ANY;
		snprintf(why, whylen, "interleave%s",
		         *node == COLI_MEM_NODE_ANY ? " (one node)" : "");
		return 0;
	}
	if (!strcmp(spec, "auto")) {
		if (coli_mem_numa_nodes() <= 1) {
			*node = COLI_MEM_NODE_ANY;
			snprintf(why, whylen, "auto: one node");
			return 0;
		}
		n = gpu_node(dev, sizeof(dev));
		if (n >= 0) {
			*node = (int)n;
			snprintf(why, whylen, "auto: node %ld of GPU %s", n, dev);
			return 0;
		}
		cpu = sched_getcpu();
		n = cpu >= 0 ? numa_node_of_cpu(cpu) : -1;
		*node = n >= 0 ? (int)n : COLI_MEM_NODE_ANY;
		snprintf(why, whylen, "auto: node %ld of cpu %d", n, cpu);
		return 0;
	}
	n = strtol(spec, &end, 10);
	if (*end || n < 0 || (numa_available() >= 0 ? n > numa_max_node() : n > 0)) {
		snprintf(why, whylen, "'%s' is not auto, off, interleave or a node 0..%d", spec,
		         numa_available() >= 0 ? numa_max_node() : 0);
		return -EINVAL;
	}
	*node = coli_mem_numa_nodes() > 1 ? (int)n : COLI_MEM_NODE_ANY;
	snprintf(why, whylen, "node %ld%s", n, coli_mem_numa_nodes() > 1 ? "" : " (one node)");
	return 0;
}

int coli_mem_numa_bind_thread(int node)
{
	if (node < 0 || numa_available() < 0)
		return 0;
	/* numa_run_on_node sets the affinity to the node's CPUs; threads made
	 * afterwards (the CPU pool, the I/O workers) inherit it. */
	return numa_run_on_node(node) ? -errno : 0;
}
