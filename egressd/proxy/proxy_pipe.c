/*
 * The pass-through pipes the proxy lends to spliced directions.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_read, ev_write: the kicks */
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "egressd/base/defaults.h"
#include "egressd/proto/http_chunk.h"
#include "egressd/proto/http_decode.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/proxy/proxy.h"
#include "egressd/proxy/proxy_pool.h"
#include "egressd/proxy/proxy_tls.h"
#include "egressd/proxy/tls_ca.h"
#include "egressd/base/sock.h"
#include "egressd/proto/tls_hello.h"
#include "egressd/proxy/tls_sess.h"
#include "util/now.h"
#include "util/secmem.h"
#include "policy/policy_binding.h"
#include "policy/policy_vault.h"
#include "vault/vault.h"
#include "egressd/proxy/proxy_int.h"

/* --- connection life ------------------------------------------------------ */

/*
 * Pass-through pipes. A spliced direction needs one only while bytes
 * are in flight, so they are lent per burst: taken from the proxy's
 * free list (or made, up to PROXY_PIPES_MAX in all) when a direction
 * reads, handed back once it is empty and the socket has nothing more.
 * Ten thousand idle pass-through connections then hold no pipe (four
 * descriptors and a pipe ring in the kernel each, before), and a busy
 * one reuses the same pipe without a syscall.
 */
bool
proxy_pipe_get(struct proxy_splice *s)
{
	struct proxy *p = s->c->p;
	int pfd[2];

	if (s->pr != -1)
		return true;
	if (p->nfree > 0) {
		p->nfree--;
		s->pr = p->pipe_free[p->nfree][0];
		s->pw = p->pipe_free[p->nfree][1];
		return true;
	}
	if (p->npipes >= PROXY_PIPES_MAX ||
	    pipe2(pfd, O_NONBLOCK | O_CLOEXEC) == -1)
		return false;
	(void)fcntl(pfd[1], F_SETPIPE_SZ, PROXY_SPLICE_MAX);
	p->npipes++;
	s->pr = pfd[0];
	s->pw = pfd[1];
	return true;
}

/* Back to the free list when empty; closed when it still holds bytes
 * (a connection closing mid-burst). */
void
proxy_pipe_put(struct proxy_splice *s)
{
	struct proxy *p = s->c->p;

	if (s->pr == -1)
		return;
	if (s->inpipe == 0 && p->nfree < PROXY_PIPES_FREE) {
		p->pipe_free[p->nfree][0] = s->pr;
		p->pipe_free[p->nfree][1] = s->pw;
		p->nfree++;
	} else {
		close(s->pr);
		close(s->pw);
		p->npipes--;
	}
	s->pr = s->pw = -1;
	s->inpipe = 0;
}
