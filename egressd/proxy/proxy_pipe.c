/*
 * The pass-through pipes the proxy lends to spliced directions.
 */
#include <fcntl.h>
#include <unistd.h>

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
