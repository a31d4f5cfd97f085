/*
 * config_judge: the spelling of --passthrough-judge and --kernel-judge
 * (config.h).
 */

#include <string.h>

#include "egressd/daemon/config.h"

static const char *const config_pt_judge_names[] = {
    [CONFIG_PT_PROXY] = "proxy",
    [CONFIG_PT_QUEUE] = "queue",
    [CONFIG_PT_AUTO] = "auto",
};

#define CONFIG_PT_N                                                            \
	(sizeof(config_pt_judge_names) / sizeof(config_pt_judge_names[0]))

int
config_parse_pt_judge(const char *s, enum config_pt_judge *out)
{
	size_t i;

	for (i = 0; i < CONFIG_PT_N; i++)
		if (strcmp(s, config_pt_judge_names[i]) == 0) {
			*out = (enum config_pt_judge)i;
			return 0;
		}
	return -1;
}

const char *
config_pt_judge_name(enum config_pt_judge v)
{
	return (unsigned)v < CONFIG_PT_N ? config_pt_judge_names[v] : "?";
}

int
config_set_pt_judge(
    struct config *c, const char *v, const char *what, struct err *e)
{
	if (config_parse_pt_judge(v, &c->pt_judge) == -1) {
		err_set(e, "%s: \"%.64s\" is not a mode (proxy, queue, auto)",
		    what, v);
		return -1;
	}
	return 0;
}

int
config_set_kernel_judge(
    struct config *c, const char *v, const char *what, struct err *e)
{
	if (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0) {
		err_set(e, "%s: \"%.64s\" is not auto or off", what, v);
		return -1;
	}
	c->kernel_judge_off = strcmp(v, "off") == 0;
	return 0;
}
