/*
 * policy_aws: the AWS names an awsSigV4 binding signs with (issue 38):
 * the region and the service of a request's credential scope, as the
 * binding states them or as AWS's own host names carry them.
 *
 * Pure: strings in, strings out.
 */
#ifndef EGRESSD_POLICY_AWS_H
#define EGRESSD_POLICY_AWS_H

#include <stdbool.h>
#include <stddef.h>

#define POLICY_AWS_REGION_MAX 32 /* bytes of a region name */
#define POLICY_AWS_SERVICE_MAX 64 /* bytes of a signing name */

/* A region as AWS spells them: lowercase letter groups joined by '-',
 * ending in a number ("us-east-1", "us-gov-west-1", "eu-central-2"). */
bool policy_aws_region_ok(const char *s);
/* A signing name: 1 to POLICY_AWS_SERVICE_MAX of [a-z0-9-], starting
 * with a letter ("s3", "bedrock", "execute-api"). */
bool policy_aws_service_ok(const char *s);

/*
 * The region and signing name that host (a lowercase name; a binding's
 * "*.suffix" is read from its suffix) carries, written into region
 * (POLICY_AWS_REGION_MAX + 1 bytes) and service (POLICY_AWS_SERVICE_MAX
 * + 1 bytes). Understood, under "amazonaws.com":
 * - S3: "s3.REGION", "BUCKET.s3.REGION", "s3.dualstack.REGION" (and
 *   BUCKET. before it), "s3-REGION", "BUCKET.s3-REGION"; "s3" and
 *   "BUCKET.s3" alone are us-east-1;
 * - everything else: "[...].ENDPOINT.REGION", the service the endpoint
 *   prefix ENDPOINT names, which is the prefix itself except where AWS
 *   signs under another name (bedrock-runtime, bedrock-agent-runtime,
 *   bedrock-agent: bedrock; email: ses; s3-control: s3).
 * False (nothing written) for any other host: the binding must name
 * region and service itself.
 */
bool policy_aws_scope(const char *host, char *region, char *service);

#endif
