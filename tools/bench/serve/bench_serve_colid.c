/*
 * tools/bench/serve/bench_serve_colid.c — the colid that `coli bench serve -m MODEL`
 * starts (tools/bench/serve/bench_serve.c runs the load against it): the colid next to
 * this coli binary, or the one --colid PATH names, run with the engine
 * options given to the bench, --port 0 and --queue clients + 16 (a run measures waiting, not
 * 429s); its stdout and stderr go to a temporary file, where the bench
 * reads the port from its "listening on" line and which it prints when
 * colid fails; SIGTERM at the end (and PR_SET_PDEATHSIG, so a killed bench
 * takes colid with it).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tools/bench/bench.h"
#include "tools/bench/serve/bench_serve.h"
#include "tools/tools.h"

void bench_serve_log_tail(const char *path)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	long sz;
	size_t n;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, sz > (long)sizeof(buf) - 1 ? sz - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	fprintf(stderr, "%s", buf);
}

/* colid next to this binary, or given (--colid; NULL: none). */
static void colid_path(const char *given, char *out, size_t cap)
{
	ssize_t n;
	char *slash;

	if (given) {
		snprintf(out, cap, "%s", given);
		return;
	}
	n = readlink("/proc/self/exe", out, cap - 7);
	if (n <= 0) {
		snprintf(out, cap, "colid");
		return;
	}
	out[n] = 0;
	slash = strrchr(out, '/');
	strcpy(slash ? slash + 1 : out, "colid");
}

int bench_serve_daemon_start(struct bench_serve_daemon *d, char **eargv, int n_eargs, int clients,
                             struct opts *o)
{
	char exe[PATH_MAX], queue[16], buf[8192];
	char **argv = calloc((size_t)n_eargs + 8, sizeof(char *));
	int fd, k = 0, rc;
	double t0;

	if (!argv)
		return -ENOMEM;
	colid_path(o->colid, exe, sizeof(exe));
	if (access(exe, X_OK)) {
		rc = -errno;
		tool_err("bench serve", "cannot run colid '%s': %s%s", exe, strerror(-rc),
		         o->colid ? "" : " (build it with make, or give --colid PATH)");
		free(argv);
		return rc;
	}
	snprintf(queue, sizeof(queue), "%d", clients + 16);
	argv[k++] = exe;
	for (int i = 0; i < n_eargs; i++)
		argv[k++] = eargv[i];
	argv[k++] = "--port";
	argv[k++] = "0";
	argv[k++] = "--queue";
	argv[k++] = queue;
	snprintf(d->log, sizeof(d->log), "/tmp/coli-bench-serve.XXXXXX");
	fd = mkstemp(d->log);
	if (fd < 0) {
		free(argv);
		return -errno;
	}
	d->pid = fork();
	if (d->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* the bench killed: colid goes too */
		dup2(fd, 1);
		dup2(fd, 2);
		execv(exe, argv);
		fprintf(stderr, "cannot run %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	free(argv);
	close(fd);
	if (d->pid < 0)
		return -errno;
	for (t0 = bench_now_s(); bench_now_s() - t0 < 600;) {
		FILE *f = fopen(d->log, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		const char *l;

		if (f)
			fclose(f);
		buf[n] = 0;
		if ((l = strstr(buf, "listening on http://"))) {
			const char *colon = strchr(l + 20, '\n');
			const char *p = colon ? colon : l + strlen(l);

			while (p > l && p[-1] != ':')
				p--;
			snprintf(o->host, sizeof(o->host), "127.0.0.1");
			snprintf(o->port, sizeof(o->port), "%d", atoi(p));
			o->base[0] = 0;
			return 0;
		}
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			d->pid = 0;
			tool_err("bench serve", "colid exited at start; its log:");
			bench_serve_log_tail(d->log);
			return -ECHILD;
		}
		usleep(20000);
	}
	tool_err("bench serve", "colid did not listen within 600 s; its log:");
	bench_serve_log_tail(d->log);
	return -ETIMEDOUT;
}

/* Stop colid; one that ended on its own during the run says how, with its
 * log's tail (its requests failed: the figures say so too). */
void bench_serve_daemon_stop(struct bench_serve_daemon *d)
{
	int st = 0;

	if (d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == d->pid) {
		if (WIFSIGNALED(st))
			tool_err("bench serve", "colid died during the run (%s); its log:",
			         strsignal(WTERMSIG(st)));
		else
			tool_err("bench serve", "colid exited during the run (status %d); its log:",
			         WEXITSTATUS(st));
		bench_serve_log_tail(d->log);
	} else if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		waitpid(d->pid, NULL, 0);
	}
	if (d->log[0])
		unlink(d->log);
}
