// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * furing: FUSE over io_uring (-o uring), our own transport beside
 * libfuse 3.14's /dev/fuse loop (libfuse gained one only in 3.18).
 *
 * Protocol (fs/fuse/dev_uring.c): after INIT, the server registers ring
 * entries with IORING_OP_URING_CMD (SQE128) on the /dev/fuse fd, one
 * queue per possible CPU; once every queue has an entry the kernel sends
 * each request to the queue of the CPU its caller runs on, as the
 * completion of one entry's command.  An entry is two buffers: a header
 * (struct tfsd_uring_req_header: the fuse_in_header, the opcode's first
 * argument, the payload size) and the payload (the other arguments).
 * The reply goes back into the same entry (out header, payload) with
 * COMMIT_AND_FETCH, which also hands the entry back for the next
 * request.  FORGET and INTERRUPT still come over /dev/fuse, so libfuse's
 * loop keeps running beside the queues, as do requests sent before the
 * ring is ready.
 *
 * How requests reach libfuse: each payload buffer has FURING_HEADROOM
 * bytes in front of it; the in header and the op header are copied
 * there, so the request is one contiguous message (no payload copy) for
 * fuse_session_process_buf, run on the queue's thread.  libfuse then
 * replies through fuseio.c's writev, which gives the reply to
 * tfsd_uring_reply: found by its unique id, copied into its entry and
 * committed.  Replies come from any thread (reads, writes and fsync
 * complete on lib's completion threads), so an entry is committed when
 * both its handler has returned and its reply is written (refs), never
 * while the handler may still read the request.
 *
 * Only the queue's thread submits to its ring.  The kernel hands the next
 * request to an entry through task work of the task that submitted the
 * entry's command: committed from a short-lived thread (op_lseek's), the
 * entry's next request failed with ECANCELED once that thread had exited
 * (opcheck's mkdir after its seek test), and from a completion thread
 * it would run in that thread.  So a reply written on another thread is
 * queued (pend) and the queue's thread woken through its eventfd.
 *
 * Lock order: a queue's pend_mu and the map's map_mu are leaves.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <liburing.h>

#include "daemon_i.h"
#include "furing_uapi.h"

#define FURING_DEPTH 64		/* entries per queue */
/* Room before a payload for the in header and the largest op header. */
#define FURING_HEADROOM 4096
#define FURING_BUCKETS 256	/* unique id -> entry hash chains */
#define ENABLE_URING_PATH "/sys/module/fuse/parameters/enable_uring"

_Static_assert(sizeof(struct fuse_in_header) + TFSD_FUSE_URING_OP_IN_OUT_SZ <= FURING_HEADROOM,
	       "headroom");

struct furing_q;

struct furing_ent {
	struct furing_q *q;
	struct tfsd_uring_req_header *hdr;
	char *payload;			/* FURING_HEADROOM after its mapping */
	uint64_t unique, commit_id;	/* of the request it holds */
	uint32_t last_op;		/* the command in flight */
	/* 2 when a request arrives: its handler running, its reply missing;
	 * the entry is committed when both are done. */
	atomic_int refs;
	struct furing_ent *next;	/* hash chain, under tfsd_uring.map_mu */
	struct iovec iov[2];		/* header, payload: read at REGISTER */
};

struct furing_q {
	struct tfsd_uring *u;
	unsigned qid;
	struct io_uring ring;
	bool ring_ok, started;
	pthread_t tid;
	int efd;			/* wakes the thread: replies pending, or stop */
	uint64_t efd_val;		/* where the eventfd read lands */
	pthread_mutex_t pend_mu;	/* protects pend, woken */
	struct furing_ent *pend;	/* replied on other threads: to commit */
	bool woken;			/* efd written since the thread took pend */
	_Atomic bool stopping;
	struct furing_ent *ents;
};

struct tfsd_uring {
	struct tfsd *d;
	int fd;				/* the session's /dev/fuse fd */
	unsigned nq;
	size_t payload_sz;
	struct furing_q *qs;
	pthread_mutex_t map_mu;
	struct furing_ent *map[FURING_BUCKETS];	/* requests awaiting replies */
	atomic_uint_fast64_t served;	/* requests received over the ring */
	atomic_uint_fast64_t handed;	/* of them, replied on another thread */
	atomic_bool refused;		/* the kernel refused; said once */
};

/* The queue whose thread is running (the only one that submits to its
 * ring; its commits go with the next submit-and-wait). */
static __thread struct furing_q *tls_q;

int tfsd_uring_check(bool quiet)
{
	char c = 0;
	FILE *f = fopen(ENABLE_URING_PATH, "re");

	if (!f) {
		if (!quiet)
			fprintf(stderr, "twinfs: -o uring: this kernel has no FUSE over io_uring "
				"(no %s)\n", ENABLE_URING_PATH);
		return -EOPNOTSUPP;
	}
	if (fread(&c, 1, 1, f) != 1)
		c = 0;
	fclose(f);
	if (c != 'Y' && c != '1') {
		if (!quiet)
			fprintf(stderr, "twinfs: -o uring: FUSE over io_uring is off (%s is N; "
				"root can write 1 there)\n", ENABLE_URING_PATH);
		return -EOPNOTSUPP;
	}
	return 0;
}

static unsigned bucket(uint64_t unique)
{
	return (unsigned)((unique >> 1) % FURING_BUCKETS);
}

static void map_put(struct tfsd_uring *u, struct furing_ent *e)
{
	unsigned b = bucket(e->unique);

	pthread_mutex_lock(&u->map_mu);
	e->next = u->map[b];
	u->map[b] = e;
	pthread_mutex_unlock(&u->map_mu);
}

static struct furing_ent *map_take(struct tfsd_uring *u, uint64_t unique)
{
	struct furing_ent **p, *e;

	pthread_mutex_lock(&u->map_mu);
	for (p = &u->map[bucket(unique)]; (e = *p) && e->unique != unique; p = &e->next)
		;
	if (e)
		*p = e->next;
	pthread_mutex_unlock(&u->map_mu);
	return e;
}

/* On q's thread only. */
static void sqe_prep(struct furing_q *q, struct furing_ent *e, uint32_t op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct tfsd_uring_cmd_req *cmd;

	if (!sqe) {
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	if (!sqe)	/* cannot happen: the SQ holds every entry's command twice */
		abort();
	/* An SQE128 slot: gcc sees only the 64-byte struct. */
	void *slot = sqe;
	__asm__("" : "+r"(slot));
	memset(slot, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = 0;
	sqe->cmd_op = op;
	if (op == TFSD_FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)e->iov;
		sqe->len = 2;
	}
	cmd = (struct tfsd_uring_cmd_req *)sqe->cmd;
	cmd->qid = (uint16_t)q->qid;
	cmd->commit_id = op == TFSD_FUSE_IO_URING_CMD_REGISTER ? 0 : e->commit_id;
	io_uring_sqe_set_data(sqe, e);
	e->last_op = op;
}

/* The eventfd's read, on q's thread. */
static void efd_arm(struct furing_q *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
	io_uring_sqe_set_data(sqe, NULL);
}

static void ent_put(struct furing_ent *e)
{
	struct furing_q *q = e->q;
	bool wake;
	uint64_t one = 1;

	if (atomic_fetch_sub(&e->refs, 1) != 1)
		return;
	if (tls_q == q) {
		sqe_prep(q, e, TFSD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
		return;
	}
	atomic_fetch_add_explicit(&q->u->handed, 1, memory_order_relaxed);
	pthread_mutex_lock(&q->pend_mu);
	e->next = q->pend;
	q->pend = e;
	wake = !q->woken;
	q->woken = true;
	pthread_mutex_unlock(&q->pend_mu);
	if (wake && write(q->efd, &one, sizeof(one)) != sizeof(one))
		tlog(LOG_ERR, "uring: cannot wake queue %u: %s", q->qid, strerror(errno));
}

/* The eventfd fired: commit what other threads replied; false to stop. */
static bool q_take_pending(struct furing_q *q)
{
	struct furing_ent *e;

	pthread_mutex_lock(&q->pend_mu);
	e = q->pend;
	q->pend = NULL;
	q->woken = false;
	pthread_mutex_unlock(&q->pend_mu);
	for (; e; e = e->next)
		sqe_prep(q, e, TFSD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
	if (atomic_load(&q->stopping))
		return false;
	efd_arm(q);
	return true;
}

bool tfsd_uring_reply(struct tfsd *d, const struct iovec *iov, int count, ssize_t *ret)
{
	struct tfsd_uring *u = atomic_load_explicit(&d->ur, memory_order_acquire);
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_out_header oh;
	struct furing_ent *e;
	size_t len = 0, total = 0;

	if (!u || count < 1 || iov[0].iov_len < sizeof(*out) || !out->unique)
		return false;
	e = map_take(u, out->unique);
	if (!e)
		return false;	/* a request read from /dev/fuse */
	oh = *out;
	for (int i = 1; i < count; i++) {
		total += iov[i].iov_len;
		if (len + iov[i].iov_len > u->payload_sz)
			continue;
		memcpy(e->payload + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (len != total) {
		tlog(LOG_ERR, "uring: reply of %zu bytes does not fit its entry (%zu)", total,
		     u->payload_sz);
		oh.error = -EIO;
		len = 0;
	}
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)len;
	*ret = (ssize_t)(total + iov[0].iov_len);
	ent_put(e);
	return true;
}

/* A request arrived in @e: make it one message and hand it to libfuse. */
static void ent_request(struct furing_ent *e)
{
	struct tfsd_uring *u = e->q->u;
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	uint32_t psz = e->hdr->ring_ent_in_out.payload_sz;
	size_t opsz = in->len - sizeof(*in) - psz;
	char *msg;

	e->commit_id = e->hdr->ring_ent_in_out.commit_id;
	e->unique = in->unique;
	atomic_store(&e->refs, 2);
	if (in->len < sizeof(*in) + psz || opsz > TFSD_FUSE_URING_OP_IN_OUT_SZ ||
	    psz > u->payload_sz) {
		struct fuse_out_header oh = { .error = -EIO, .unique = in->unique };

		tlog(LOG_ERR, "uring: malformed request (opcode %u, len %u, payload %u)",
		     in->opcode, in->len, psz);
		memcpy(e->hdr->in_out, &oh, sizeof(oh));
		e->hdr->ring_ent_in_out.payload_sz = 0;
		atomic_store(&e->refs, 1);
		ent_put(e);
		return;
	}
	msg = e->payload - opsz - sizeof(*in);
	memcpy(msg, in, sizeof(*in));
	memcpy(msg + sizeof(*in), e->hdr->op_in, opsz);
	map_put(u, e);
	atomic_fetch_add_explicit(&u->served, 1, memory_order_relaxed);
	tfsd_note_request(u->d, msg, in->len);
	fuse_session_process_buf(u->d->se, &(struct fuse_buf){ .mem = msg, .size = in->len });
	ent_put(e);
}

/* One completion; false when the queue is to stop. */
static bool q_cqe(struct furing_q *q, const struct io_uring_cqe *cqe)
{
	struct furing_ent *e = io_uring_cqe_get_data(cqe);
	int res = cqe->res;

	if (!e)
		return q_take_pending(q);
	if (res == 0) {
		ent_request(e);
		return true;
	}
	if (res == -EAGAIN || res == -EINTR) {
		sqe_prep(q, e, e->last_op);
		return true;
	}
	/* -ENOTCONN, -ECANCELED: the connection is going away. */
	if (res != -ENOTCONN && res != -ECANCELED &&
	    !atomic_exchange(&q->u->refused, true))
		tlog(LOG_ERR, "uring: the kernel refused %s on queue %u (%s): requests go over "
		     "/dev/fuse read/write", e->last_op == TFSD_FUSE_IO_URING_CMD_REGISTER ?
		     "an entry" : "a reply", q->qid, strerror(-res));
	return true;
}

static void *q_main(void *arg)
{
	struct furing_q *q = arg;
	struct io_uring_cqe *cqe;
	cpu_set_t set;

	tls_q = q;
	/* Requests of CPU qid come here: serve them there. */
	CPU_ZERO(&set);
	CPU_SET(q->qid, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
	for (;;) {
		unsigned head, n = 0;
		bool go = true;
		int ret;

		/* The commits of the last batch, and wait for the next. */
		ret = io_uring_submit_and_wait(&q->ring, 1);
		if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY)
			continue;
		if (ret < 0) {
			tlog(LOG_ERR, "uring: queue %u: %s", q->qid, strerror(-ret));
			break;
		}
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			n++;
			if (!q_cqe(q, cqe))
				go = false;
		}
		io_uring_cq_advance(&q->ring, n);
		if (!go)
			break;
	}
	return NULL;
}

/* The kernel's number of possible CPUs (it makes one queue for each). */
static unsigned possible_cpus(void)
{
	unsigned lo, hi;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	int n = f ? fscanf(f, "%u-%u", &lo, &hi) : 0;

	if (f)
		fclose(f);
	if (n == 2)
		return hi + 1;
	if (n == 1)
		return lo + 1;
	return (unsigned)get_nprocs_conf();
}

static void q_free(struct furing_q *q, size_t payload_sz)
{
	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);
	if (q->efd >= 0)
		close(q->efd);
	for (unsigned i = 0; q->ents && i < FURING_DEPTH; i++) {
		struct furing_ent *e = &q->ents[i];

		if (e->payload)
			munmap(e->payload - FURING_HEADROOM, FURING_HEADROOM + payload_sz);
		free(e->hdr);
	}
	free(q->ents);
	pthread_mutex_destroy(&q->pend_mu);
}

/* A queue's ring, entries and REGISTER commands (not yet submitted). */
static int q_init(struct tfsd_uring *u, struct furing_q *q, unsigned qid)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	int ret;

	q->u = u;
	q->qid = qid;
	q->efd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&q->pend_mu, NULL);
	q->ents = calloc(FURING_DEPTH, sizeof(*q->ents));
	if (q->efd < 0 || !q->ents)
		return -ENOMEM;
	ret = io_uring_queue_init_params(2 * FURING_DEPTH + 2, &q->ring, &p);
	if (ret < 0)
		return ret;
	q->ring_ok = true;
	ret = io_uring_register_files(&q->ring, &u->fd, 1);
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < FURING_DEPTH; i++) {
		struct furing_ent *e = &q->ents[i];
		char *m = mmap(NULL, FURING_HEADROOM + u->payload_sz, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return -ENOMEM;
		e->q = q;
		e->payload = m + FURING_HEADROOM;
		e->hdr = calloc(1, sizeof(*e->hdr));
		if (!e->hdr)
			return -ENOMEM;
		e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
		e->iov[1] = (struct iovec){ e->payload, u->payload_sz };
		sqe_prep(q, e, TFSD_FUSE_IO_URING_CMD_REGISTER);
	}
	efd_arm(q);
	return 0;
}

void tfsd_uring_start(struct tfsd *d, int fd, const struct fuse_init_out *init)
{
	size_t pages = (init->flags & FUSE_MAX_PAGES) ? init->max_pages : 0;
	struct tfsd_uring *u = calloc(1, sizeof(*u));
	unsigned i;
	int ret = -ENOMEM;

	if (!u)
		goto fail;
	u->d = d;
	u->fd = fd;
	u->nq = possible_cpus();
	/* What the kernel sizes its copies by (fuse_uring_create). */
	u->payload_sz = 8192;
	if (init->max_write > u->payload_sz)
		u->payload_sz = init->max_write;
	if (pages * 4096 > u->payload_sz)
		u->payload_sz = pages * 4096;
	pthread_mutex_init(&u->map_mu, NULL);
	u->qs = calloc(u->nq, sizeof(*u->qs));
	if (!u->qs)
		goto fail;
	for (i = 0; i < u->nq; i++) {
		u->qs[i].efd = -1;
		ret = q_init(u, &u->qs[i], i);
		if (ret < 0)
			goto fail;
	}
	atomic_store_explicit(&d->ur, u, memory_order_release);
	for (i = 0; i < u->nq; i++) {
		struct furing_q *q = &u->qs[i];

		if (pthread_create(&q->tid, NULL, q_main, q) == 0)
			q->started = true;
		else
			tlog(LOG_ERR, "uring: cannot start the thread of queue %u", i);
	}
	tlog(LOG_INFO, "uring: %u queues of %d entries, payload %zu bytes", u->nq, FURING_DEPTH,
	     u->payload_sz);
	return;
fail:
	tlog(LOG_ERR, "uring: cannot set up FUSE over io_uring (%s): requests go over /dev/fuse "
	     "read/write", strerror(-ret));
	for (i = 0; u && u->qs && i < u->nq; i++)
		q_free(&u->qs[i], u->payload_sz);
	if (u)
		free(u->qs);
	free(u);
}

void tfsd_uring_stop(struct tfsd *d)
{
	struct tfsd_uring *u = atomic_load(&d->ur);
	uint64_t one = 1;

	if (!u)
		return;
	for (unsigned i = 0; i < u->nq; i++) {
		struct furing_q *q = &u->qs[i];

		if (!q->started)
			continue;
		atomic_store(&q->stopping, true);
		if (write(q->efd, &one, sizeof(one)) != sizeof(one))
			tlog(LOG_ERR, "uring: cannot stop queue %u: %s", i, strerror(errno));
		pthread_join(q->tid, NULL);
	}
	atomic_store(&d->ur, NULL);
	tlog(LOG_INFO, "uring: %llu requests came over io_uring, %llu of them replied on "
	     "another thread (handed to the queue's thread through its eventfd)",
	     (unsigned long long)atomic_load(&u->served),
	     (unsigned long long)atomic_load(&u->handed));
	for (unsigned i = 0; i < u->nq; i++)
		q_free(&u->qs[i], u->payload_sz);
	free(u->qs);
	pthread_mutex_destroy(&u->map_mu);
	free(u);
}
