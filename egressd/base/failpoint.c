#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "egressd/base/failpoint.h"

void
failpoint_hit(const char *configured, const char *step, struct log *lg)
{
	if (configured == NULL || strcmp(configured, step) != 0)
		return;
	log_warn(lg, "test.failpoint", LOG_S("step", step));
	(void)kill(getpid(), SIGKILL);
}
