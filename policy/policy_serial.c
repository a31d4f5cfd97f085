/*
 * policy_serial: the user policy as GET /policy returns it (JSON).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"

static const char *
action_name(enum policy_action a)
{
	return a == POLICY_ALLOW ? "allow" : "deny";
}

static json_t *
ports_json(const struct policy_rule *r)
{
	json_t *a = json_array();
	char buf[16];
	size_t i;

	for (i = 0; a != NULL && i < r->nports; i++) {
		const struct policy_port_range *pr = &r->ports[i];
		json_t *v;
		if (pr->lo == pr->hi)
			v = json_integer(pr->lo);
		else {
			(void)snprintf(
			    buf, sizeof(buf), "%u-%u", pr->lo, pr->hi);
			v = json_string(buf);
		}
		if (json_array_append_new(a, v) == -1) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *
protocols_json(unsigned protos)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{POLICY_PROTO_TCP, "tcp"}, {POLICY_PROTO_UDP, "udp"},
	    {POLICY_PROTO_ICMP, "icmp"}};
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < 3; i++)
		if ((protos & names[i].bit) &&
		    json_array_append_new(a, json_string(names[i].name)) ==
		        -1) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *
rule_json(const struct policy_rule *r)
{
	json_t *o = json_object();

	if (o == NULL ||
	    json_object_set_new(
	        o, "action", json_string(action_name(r->action))) == -1 ||
	    json_object_set_new(o, "target", json_string(r->display)) == -1)
		goto out_free;
	if (r->nports > 0 &&
	    json_object_set_new(o, "ports", ports_json(r)) == -1)
		goto out_free;
	if ((r->protocols & POLICY_PROTO_ALL) != POLICY_PROTO_ALL &&
	    json_object_set_new(o, "protocols", protocols_json(r->protocols)) ==
	        -1)
		goto out_free;
	return o;
out_free:
	json_decref(o);
	return NULL;
}

char *
policy_user_to_json(const struct policy *p)
{
	json_t *o = json_object(), *eg = json_array();
	char *s = NULL;
	size_t i;

	if (o == NULL || eg == NULL || p == NULL)
		goto out_free;
	if (json_object_set_new(o, "defaultAction",
	        json_string(action_name(p->default_action))) == -1)
		goto out_free;
	for (i = 0; i < p->nrules; i++)
		if (json_array_append_new(eg, rule_json(&p->rules[i])) == -1)
			goto out_free;
	if (json_object_set_new(o, "egress", eg) == -1) {
		eg = NULL;
		goto out_free;
	}
	eg = NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
out_free:
	json_decref(eg);
	json_decref(o);
	return s;
}

char *
policy_to_yaml(const struct policy *p)
{
	(void)p;
	return NULL; /* slice 4 */
}
