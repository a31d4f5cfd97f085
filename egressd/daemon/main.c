/*
 * egressd: egress sidecar for AI-agent sandboxes.
 * main() owns the config, the logger and the daemon context; nothing else
 * in the program holds mutable global state.
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/base/log.h"
#include "egressd/daemon/policyfile.h"
#include "policy/policy.h"

extern char **environ;

static size_t
count_bindings(const struct policy *p)
{
	return p->nbindings;
}

/* --check: the same loader as start and reload, every error printed. */
static int
check_policy(const struct config *cfg)
{
	struct policyfile_info info;
	struct policy_diag d;
	struct policy *p;
	struct err e = {""};
	size_t i;

	policy_diag_init(&d);
	p = policyfile_load(cfg, &d, &info);
	if (info.file_missing)
		fprintf(stderr,
		    "egressd: warning: policy file %s does not exist; "
		    "egressd would start from %s\n",
		    cfg->policy_file, info.fallback);
	if (p == NULL) {
		for (i = 0; i < d.n; i++)
			fprintf(stderr, "%s\n", d.msgs[i]);
		if (d.truncated)
			fprintf(stderr, "(more errors not shown)\n");
		if (d.n == 0)
			fprintf(stderr, "egressd: policy rejected\n");
		policy_diag_clear(&d);
		return 1;
	}
	if (daemon_wire_enforceable(cfg, p, &e) == -1) {
		fprintf(stderr, "%s\n", e.msg);
		policy_unref(p);
		policy_diag_clear(&d);
		return 1;
	}
	printf("ok: %zu rules, %zu bindings\n",
	    p->nrules + p->nalways_deny + p->nalways_allow + p->ninfra,
	    count_bindings(p));
	policy_unref(p);
	policy_diag_clear(&d);
	return 0;
}

/*
 * The API token and credentials live in this process: no core dump may
 * carry them, and no process of the same uid may ptrace us or read
 * /proc/PID/mem (PR_SET_DUMPABLE 0 also makes /proc/PID root-owned).
 */
static void
harden_process(void)
{
	struct rlimit rl = {0, 0};

	(void)setrlimit(RLIMIT_CORE, &rl);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int
main(int argc, char **argv)
{
	struct config cfg;
	struct log lg;
	struct egressd *d;
	struct err e = {""};
	int rc;

	harden_process();
	config_init(&cfg);
	if (config_from_env(&cfg, environ, &e) == -1 ||
	    config_from_args(&cfg, argc, argv, &e) == -1) {
		fprintf(stderr, "egressd: %s\n", e.msg);
		config_clear(&cfg);
		return 2;
	}
	if (cfg.help) {
		config_usage(stdout);
		config_clear(&cfg);
		return 0;
	}
	if (cfg.version) {
		printf("egressd %s\n", EGRESSD_VERSION);
		config_clear(&cfg);
		return 0;
	}
	if (config_finish(&cfg, &e) == -1) {
		fprintf(stderr, "egressd: %s\n", e.msg);
		config_clear(&cfg);
		return 2;
	}
	if (cfg.check) {
		rc = check_policy(&cfg);
		config_clear(&cfg);
		return rc;
	}

	log_init(&lg, STDOUT_FILENO, cfg.log_level);
	log_set_sandbox_id(&lg, cfg.sandbox_id);
	if (cfg.log_file != NULL && log_open_file(&lg, cfg.log_file) == -1) {
		fprintf(stderr, "egressd: %s: cannot open log file\n",
		    cfg.log_file);
		config_clear(&cfg);
		return 2;
	}
	if ((d = daemon_new(&cfg, &lg, &e)) == NULL) {
		log_error(&lg, "egressd.start_failed", LOG_S("error", e.msg));
		fprintf(stderr, "egressd: %s\n", e.msg);
		log_clear(&lg);
		config_clear(&cfg);
		return 1;
	}
	/* the daemon holds the proxy credential now (uproxy.h) */
	config_uproxy_clear(&cfg.uproxy);
	rc = daemon_run(d);
	daemon_free(d);
	log_clear(&lg);
	config_clear(&cfg);
	return rc;
}
