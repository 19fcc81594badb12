/*
 * tests/io/container_disk_full.c — the writer on a full disk leaves nothing
 * behind and says why, naming the file.
 *
 *   1. file size limit (works unprivileged): a child sets RLIMIT_FSIZE below
 *      the container's size with SIGXFSZ ignored, so reserving the file fails
 *      with EFBIG; after _abort neither PATH nor PATH.tmp.* exists.
 *   2. a real tiny tmpfs (root only, when mount(2) works here): the up-front
 *      free-space check refuses with "needs N bytes ... M free" before a
 *      byte is written, and nothing is left. Skipped (said once) otherwise.
 *      (ENOSPC from fallocate or pwrite takes the same unwinding path as
 *      case 1's EFBIG.)
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/synth.h"

static int leftovers(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, base, strlen(base)))
			n++, fprintf(stderr, "left behind: %s/%s\n", dir, de->d_name);
	if (d)
		closedir(d);
	return n;
}

/* 0 if synth_write(dir/base) fails with want_rc, a message naming the file
 * and containing needle, and leaves no file. */
static int expect_fail(const char *dir, const char *base, int want_rc, const char *needle)
{
	char path[512];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, base);
	rc = synth_write(path, 0);
	printf("%s: rc %d: %s\n", base, rc, coli_io_errmsg());
	if (rc != want_rc || strncmp(coli_io_errmsg(), path, strlen(path)) ||
	    !strstr(coli_io_errmsg(), needle)) {
		fprintf(stderr, "FAIL: want rc %d and '%s'\n", want_rc, needle);
		return 1;
	}
	return leftovers(dir, base) ? 1 : 0;
}

static int fsize_limit(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct rlimit rl = {16384, 16384};

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl))
			_exit(2);
		st = expect_fail(".", "fsize.coli", -EFBIG, "file size limit");
		fflush(stdout);
		_exit(st);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}

/* 1 = skipped, 0 = pass, -1 = fail */
static int tmpfs_full(void)
{
	const char *dir = "mnt";
	int fail = 0;

	if (geteuid() != 0)
		return 1;
	mkdir(dir, 0755);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k")) {
		rmdir(dir);
		return 1;
	}
	/* the synthetic container is ~144 KiB: refused before a byte is written */
	fail |=
	    expect_fail(dir, "tiny.coli", -ENOSPC, "not enough free space: the container needs");
	umount(dir);
	rmdir(dir);
	return fail ? -1 : 0;
}

int main(void)
{
	int rc;

	if (fsize_limit()) {
		fprintf(stderr, "FAIL: file size limit case\n");
		return 1;
	}
	rc = tmpfs_full();
	if (rc < 0) {
		fprintf(stderr, "FAIL: tmpfs case\n");
		return 1;
	}
	if (rc > 0)
		printf("tmpfs case skipped: needs root and mount(2)\n");
	printf("disk full ok\n");
	return 0;
}
