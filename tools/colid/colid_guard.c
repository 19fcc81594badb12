/*
 * tools/colid/colid_guard.c — slow clients cannot starve colid. libmicrohttpd's
 * --timeout is an idle timeout, reset by every byte: a client that trickles
 * one header line every few seconds keeps its connection (and its thread)
 * forever, and --max-connections such clients lock everyone else out. The
 * guard tracks every connection from libmicrohttpd's connection
 * notifications and keeps two rules:
 *
 *   deadline  a connection is "pending" from its accept, and again from the
 *             end of each request, until the next request has been received
 *             whole (headers and body); pending longer than
 *             --header-timeout seconds, its socket is shut down
 *   headroom  at most max_pending connections may be pending at once
 *             (--max-connections less a quarter, see colid_guard_start):
 *             a new connection past that shuts a pending one down, the
 *             oldest of the address holding the most pending ones, so the
 *             last quarter of the limit stays free for clients that send
 *             their request at once (/health, /metrics, a chat request), and
 *             a burst of reconnecting tricklers cuts its own connections,
 *             not a lone client's whose request has not arrived whole yet
 *
 * Neither rule takes a connection whose request head waits whole in its
 * socket, unread (a peek finds its empty line): then colid is behind, not
 * the client. On a loaded host a lone client's request can wait there
 * while its thread is not yet scheduled, and tricklers spread over
 * addresses hold one or two pending a piece, as many as it: by age alone
 * the headroom would cut it, and the client would read a close without a
 * response (tests/daemon/slow_clients' "/health RemoteDisconnected"). Such
 * a connection is taken only when every pending one is one; the deadline
 * waits for its next check. (Unread bytes alone say nothing: a starved
 * colid leaves the tricklers' lines unread too, and a connection just
 * accepted holds none yet.)
 *
 * "Shut down" is shutdown(SHUT_RDWR) on the socket, under the guard's mutex
 * and only while the connection is listed: libmicrohttpd's thread then reads
 * end-of-file and closes the connection, and its CLOSED notification (which
 * comes before libmicrohttpd closes the descriptor) unlists it, so the guard
 * never touches a reused descriptor. A connection whose request is being
 * answered (a generation may take minutes) is never shut down here.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "tools/colid/colid.h"

struct colid_slot {
	struct colid_slot *prev, *next; /* the guard's list, oldest pending first */
	int fd;
	int pending; /* no whole request yet since `since` */
	int killed;  /* shut down by the guard */
	double since;
	unsigned char addr[16]; /* the peer's address (IPv4: the first 4 bytes) */
};

/* Caller holds g->mu. */
static void unlink_slot(struct colid_guard *g, struct colid_slot *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		g->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		g->tail = c->prev;
	c->prev = c->next = NULL;
}

/* Caller holds g->mu. */
static void append_slot(struct colid_guard *g, struct colid_slot *c)
{
	c->prev = g->tail;
	c->next = NULL;
	if (g->tail)
		g->tail->next = c;
	else
		g->head = c;
	g->tail = c;
}

/* The peer address of a new connection, as a key (zeros when unknown). */
static void peer_key(struct MHD_Connection *mc, unsigned char key[16])
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	memset(key, 0, 16);
	if (sa && sa->sa_family == AF_INET)
		memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	else if (sa && sa->sa_family == AF_INET6)
		memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
}

/* Whether fd's socket holds, unread by libmicrohttpd, the end of a request
 * head (an empty line): the client sent it whole, colid has yet to read it.
 * A trickler never sends that line. (A peek: the bytes stay for the reader;
 * a head longer than the buffer is not seen, and the rules apply.) */
static int head_waits(int fd)
{
	char buf[4096];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	return n >= 4 && memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL;
}

/* The headroom's victim: of the pending connections (those whose request
 * head does not wait whole in the socket, unless all of them do), one of
 * the address holding the most of them, the oldest there. Caller holds
 * g->mu. */
static struct colid_slot *victim(struct colid_guard *g)
{
	struct colid_slot *best = NULL;
	int most = 0;

	for (int any = 0; any < 2 && !best; any++)
		for (struct colid_slot *o = g->head; o; o = o->next) {
			int n = 0;

			if (!o->pending || (!any && head_waits(o->fd)))
				continue;
			for (struct colid_slot *p = g->head; p; p = p->next)
				n += p->pending && !memcmp(p->addr, o->addr, sizeof(o->addr));
			if (n > most) /* (the list is oldest first: ties keep the older) */
				most = n, best = o;
		}
	return best;
}

/* Caller holds g->mu. */
static void kill_slot(struct colid_guard *g, struct colid_slot *c, int timed_out)
{
	shutdown(c->fd, SHUT_RDWR);
	c->killed = 1;
	if (c->pending) {
		c->pending = 0;
		g->n_pending--;
	}
	if (timed_out)
		g->timed_out++;
	else
		g->evicted++;
}

void colid_guard_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
	struct colid_guard *g = cls;
	struct colid_slot *c = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		c = calloc(1, sizeof(*c));
		if (!c || !ci) {
			free(c);
			return; /* unguarded: --timeout still applies */
		}
		c->fd = ci->connect_fd;
		c->pending = 1;
		c->since = colid_now_s();
		peer_key(mc, c->addr);
		pthread_mutex_lock(&g->mu);
		append_slot(g, c);
		g->n_pending++;
		while (g->n_pending > g->max_pending)
			kill_slot(g, victim(g), 0);
		pthread_mutex_unlock(&g->mu);
		*socket_context = c;
		return;
	}
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->pending)
		g->n_pending--;
	unlink_slot(g, c);
	pthread_mutex_unlock(&g->mu);
	free(c);
	*socket_context = NULL;
}

static struct colid_slot *slot_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

int colid_guard_received(struct colid_guard *g, struct MHD_Connection *mc)
{
	struct colid_slot *c = slot_of(mc);
	int killed;

	if (!c)
		return 0;
	pthread_mutex_lock(&g->mu);
	if (c->pending) {
		c->pending = 0;
		g->n_pending--;
	}
	killed = c->killed;
	pthread_mutex_unlock(&g->mu);
	return killed ? -ECONNRESET : 0;
}

void colid_guard_answered(struct colid_guard *g, struct MHD_Connection *mc)
{
	struct colid_slot *c = slot_of(mc);

	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (!c->killed) { /* waits for the next request: a fresh deadline */
		if (!c->pending)
			g->n_pending++;
		c->pending = 1;
		c->since = colid_now_s();
		unlink_slot(g, c);
		append_slot(g, c);
	}
	pthread_mutex_unlock(&g->mu);
}

static void *watch(void *arg)
{
	struct colid_guard *g = arg;

	pthread_mutex_lock(&g->mu);
	while (!g->quit) {
		struct timespec ts;
		double now = colid_now_s();

		for (struct colid_slot *c = g->head; c; c = c->next)
			if (c->pending && now - c->since > g->deadline_s && !head_waits(c->fd))
				kill_slot(g, c, 1);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int colid_guard_start(struct colid_guard *g, double deadline_s, int max_conn)
{
	int rc;

	g->deadline_s = deadline_s;
	g->max_pending = max_conn < 4 ? max_conn : max_conn - max_conn / 4;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	rc = pthread_create(&g->thread, NULL, watch, g);
	if (rc) {
		pthread_cond_destroy(&g->cv);
		pthread_mutex_destroy(&g->mu);
		return -rc;
	}
	g->started = 1;
	return 0;
}

void colid_guard_stop(struct colid_guard *g)
{
	if (!g->started)
		return;
	pthread_mutex_lock(&g->mu);
	g->quit = 1;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->thread, NULL);
	/* libmicrohttpd has stopped: every CLOSED notification has come */
	while (g->head) {
		struct colid_slot *c = g->head;

		unlink_slot(g, c);
		free(c);
	}
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	g->started = 0;
}
