/*
 * dns_log: the resolver's denials (dns.deny, aggregated per name and
 * rate-limited, never dropped) and its rate-limited warnings.
 */
#include <stdio.h>
#include <stdlib.h>

#include "egressd/dns/dns_int.h"
#include "egressd/base/log_agg.h"

/* One dns.deny line; count = the denials of that name it stands for. */
static void
dns_deny_emit_cb(void *arg, const struct log_agg_rec *r, uint64_t count)
{
	struct dns *d = arg;

	log_info(d->lg, "dns.deny", LOG_S("name", r->name),
	    LOG_U("qtype", r->qtype), LOG_S("reason", r->reason),
	    r->denied[0] != '\0' ? LOG_S("denied", r->denied) : LOG_BEGIN_,
	    r->rule[0] != '\0' ? LOG_S("rule", r->rule) : LOG_BEGIN_,
	    LOG_U("count", count));
}

void
dns_log_deny(struct dns *d, const char *qname, uint16_t qtype,
    const char *reason, const char *denied, const struct policy_rule *rule)
{
	struct log_agg_rec rec;
	struct policy *pol;
	uint64_t count;

	/* log_skip.always: expected denials, neither logged nor notified. */
	pol = d->h.policy_get != NULL ? d->h.policy_get(d->h.arg) : NULL;
	if (pol != NULL && policy_log_skip(pol, qname))
		return;
	if (d->h.on_deny != NULL)
		d->h.on_deny(d->h.arg, qname, reason);
	/*
	 * Rate-limited per name, never dropped by name: what the limit
	 * holds back is written by the next flush (dns_log_flush).
	 */
	log_agg_rec_set(&rec, qname, qtype, reason, denied,
	    rule != NULL ? rule->display : NULL);
	if (log_agg_event(&d->deny_agg, &rec, dns_now(d), &count))
		dns_deny_emit_cb(d, &rec, count);
}

void
dns_log_flush(struct dns *d)
{
	struct log_agg_summary sum;

	log_agg_flush(&d->deny_agg, dns_now(d), dns_deny_emit_cb, d, &sum);
	if (sum.names > 0 || sum.events > 0)
		log_warn(d->lg, "dns.deny_summary", LOG_S("reason", "flood"),
		    LOG_U("names", sum.names), LOG_U("events", sum.events));
}

void
dns_log_warn(struct dns *d, const char *ev, const char *qname,
    const char *reason, const char *detail)
{
	char key[DNS_NAME_PRES_MAX + 64];

	(void)snprintf(key, sizeof(key), "%s|%s", ev, qname);
	if (!log_limiter_allow(&d->warn_lim, key, dns_now(d)))
		return;
	log_warn(d->lg, ev, LOG_S("name", qname), LOG_S("reason", reason),
	    detail != NULL ? LOG_S("detail", detail) : LOG_BEGIN_);
}
