#!/bin/bash
# proxy_trust_stores: egressd's CA in the trust stores that ignore the
# bundle variables, put there by deploy/egressd-ca-install run as the
# sandbox's uid (as an init container would) from the bundle egressd
# writes. Java (Debian's JRE, java.net.http.HttpClient) fails on the
# terminated host without the truststore and, with only
# JAVA_TOOL_OPTIONS naming it, reaches the bound host and the origin gets
# the injected secret; the truststore keeps the JRE's roots (every entry
# of cacerts, and a pass-through host verified by a root it started
# from). NSS: `certutil -L` lists the CA as a trusted issuer and an NSS
# client (tstclnt) reaches the bound host with the database, not without.
# A re-run changes nothing; a rotated CA (egressd restarted on a new one)
# breaks the old stores and a re-run replaces the CA in both.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
for t in java javac keytool certutil tstclnt; do
	command -v "$t" >/dev/null ||
	    tb_die "$t not installed (./run deps: openjdk-17-jdk-headless, libnss3-tools)"
done
tb_setup

SECRET=$(tb_random_key)
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET]}
    auth: {type: bearer, credential: k}
EOF
)
# the bundle on a directory of its own the sandbox may read, as in the
# deployments; the state directory (the CA key) stays egressd's
mkdir -p "$TB_DIR/ca" && chmod 755 "$TB_DIR/ca"
BUNDLE=$TB_DIR/ca/ca-bundle.pem
STATE=$TB_DIR/egressd/state
start() {
	tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
	    --state-dir "$STATE" --ca-bundle "$BUNDLE"
}
start

# the client, compiled here (the JDK); everything after runs on the JRE
JDIR=$TB_DIR/sbx-bin/java
mkdir -p "$JDIR" && chmod 755 "$JDIR"
javac -d "$JDIR" "$EGRESSD_SRCDIR/tests/e2e/tools/TrustGet.java" ||
    tb_die "javac TrustGet.java"
cp "$EGRESSD_SRCDIR/deploy/egressd-ca-install" "$TB_DIR/sbx-bin/" &&
    chmod 755 "$TB_DIR/sbx-bin/egressd-ca-install"

# Every JVM here is a short one (some 20 in all): C1 alone starts them
# faster. Test speed only; the stores and the client do not depend on it.
FAST="-XX:TieredStopAtLevel=1 -XX:-UsePerfData"
T=$TB_SBX_HOME/trust # the init container's volume
JKS=$T/java-truststore.p12
NSS=$T/nssdb
# what docs/operations.md tells the operator to set
JOPTS="-Djavax.net.ssl.trustStore=$JKS -Djavax.net.ssl.trustStorePassword=changeit -Djavax.net.ssl.trustStoreType=PKCS12"
# jget [JAVA-OPTIONS] URL... [HEADER...]: the Java client in the sandbox
jget() {
	local o=$1
	shift
	tb_sandbox env JAVA_TOOL_OPTIONS="$FAST $o" \
	    java -cp "$JDIR" TrustGet "$@" 2>&1
}
# install: what the init container runs, as the sandbox's uid
install() {
	tb_sandbox mkdir -p "$T" &&
	    tb_sandbox env JAVA_TOOL_OPTIONS="$FAST" egressd-ca-install \
	    --java-keystore "$JKS" --nss-db "$NSS" "$BUNDLE" >>"$TB_OUT" 2>&1
}
# fp [FILE]: the SHA-256 fingerprint of a PEM certificate
fp() { openssl x509 -noout -fingerprint -sha256 ${1:+-in "$1"} | sed 's/.*=//'; }
# jks_state: the number of trusted entries of the truststore and the
# fingerprint of its egressd-ca, from one keytool -list
jks_state() {
	tb_sandbox env JAVA_TOOL_OPTIONS="$FAST" keytool -list \
	    -keystore "$JKS" -storepass changeit 2>/dev/null |
	    awk '/trustedCertEntry/ { n++ } /^egressd-ca,/ { e = 1; next }
	        e && /\(SHA-256\):/ { f = $NF; e = 0 } END { print n, f }'
}
# nss_state: how many certificates are named egressd-ca, and the one's
# fingerprint
nss_state() {
	echo "$(tb_sandbox certutil -L -d "sql:$NSS" | grep -c '^egressd-ca ') $(
	    tb_sandbox certutil -L -d "sql:$NSS" -n egressd-ca -a | fp)"
}
CA1=$(fp "$STATE/ca.crt")
PKIX='PKIX path (building|validation) failed'

# --- Java without the truststore: egressd's leaf is not trusted ----------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(jget "" https://a.test/v1/me 'Authorization: Bearer fake-key')
tb_expect_match "Java on the JRE's cacerts alone: the handshake fails (PKIX)" \
    "$PKIX" "$out"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/me

# --- the install ---------------------------------------------------------------
tb_check "egressd-ca-install --java-keystore --nss-db, as the sandbox's uid" install
# the JRE's cacerts, found as the script finds it (Debian: a link to
# /etc/ssl/certs/java/cacerts, a JKS of ca-certificates-java)
kt=$(readlink -f "$(command -v keytool)")
n_src=$(keytool -J-XX:TieredStopAtLevel=1 -list -storepass changeit \
    -keystore "${kt%/bin/keytool}/lib/security/cacerts" 2>/dev/null |
    grep -c trustedCertEntry)
tb_check "the JRE's cacerts holds roots (over 50)" test "$n_src" -gt 50
tb_expect_eq "the truststore: every root of the JRE's cacerts, and egressd's CA (the bundle's last certificate) as egressd-ca" \
    "$((n_src + 1)) $CA1" "$(jks_state)"
tb_expect_eq "... a file the sandbox reads (0644)" 644 "$(stat -c %a "$JKS")"

# --- Java with the truststore: the bound host, with injection ------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(jget "$JOPTS" 'https://a.test/v1/me?echo=Authorization' \
    'Authorization: Bearer fake-key')
tb_expect_match "Java HttpClient with JAVA_TOOL_OPTIONS naming the truststore: 200" \
    '^STATUS 200 ' "$out"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/me \
    "h.authorization=Bearer $SECRET"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected \
    binding=a-api host=a.test path=/v1/me
tb_expect_match "... its echo comes back masked" '"authorization": *"\*+"' "$out"
tb_check_fails "... the secret nowhere in it" grep -qF "$SECRET" <<<"$out"

# --- the roots kept work: a pass-through host ------------------------------------
# c.test has no binding: egressd passes its TLS through and the client
# sees the origin's own certificate, issued by the run's CA, a root the
# JRE does not know. A truststore made from a cacerts that holds it (a
# stand-in for the JRE's roots) verifies it and egressd's leaf alike.
out=$(jget "$JOPTS" https://c.test/)
tb_expect_match "pass-through to c.test on the JRE's roots + the CA: not a root of it" \
    "$PKIX" "$out"
ROOTS=$T/roots.p12
JKS2=$T/java-roots.p12
tb_check "a cacerts holding the run's CA, and a truststore made from it" \
    tb_sandbox env JAVA_TOOL_OPTIONS="$FAST" sh -c "keytool -importcert \
    -noprompt -alias test-root -file '$TB_CA_CERT' -keystore '$ROOTS' \
    -storetype PKCS12 -storepass changeit && egressd-ca-install \
    --java-keystore '$JKS2' --java-cacerts '$ROOTS' '$BUNDLE'"
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
out=$(jget "-Djavax.net.ssl.trustStore=$JKS2 -Djavax.net.ssl.trustStorePassword=changeit" \
    https://c.test/ https://a.test/v1/both)
tb_expect_match "... pass-through to c.test verifies on the root kept: 200" \
    '^STATUS 200 https://c.test/$' "$out"
# passed through: judged in flight (the default where the kernel can
# queue: by the queue, or in the kernel) or by the proxy; in flight,
# the proxy never saw it
if tb_pt_in_flight; then
	tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" proxy.closed \
	    name=c.test
	tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" nfq.judged \
	    decision=refused name=c.test
else
	tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" proxy.closed \
	    decision=passthrough name=c.test
fi
tb_expect_match "... and egressd's leaf for a.test on the same store: 200" \
    '^STATUS 200 https://a.test/v1/both$' "$out"

# --- NSS -----------------------------------------------------------------------
out=$(tb_sandbox certutil -L -d "sql:$NSS" 2>&1)
tb_expect_match "certutil -L lists egressd-ca as a trusted TLS issuer (C,,)" \
    '^egressd-ca +C,,' "$out"
tb_check "certutil -V: NSS validates it as an SSL CA" \
    tb_sandbox certutil -V -d "sql:$NSS" -n egressd-ca -u L
tb_expect_eq "... one, and it is egressd's CA" "1 $CA1" "$(nss_state)"
# an NSS client: tstclnt verifies the server's chain against the
# database (it loads no built-in roots: a database without the CA is the
# negative)
REQ=$TB_SBX_HOME/req
printf 'GET /v1/nss?echo=Authorization HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer fake-key\r\nConnection: close\r\n\r\n' >"$REQ"
chmod 644 "$REQ"
# nss_get DB: the request through tstclnt
nss_get() {
	tb_sandbox timeout 10 tstclnt -4 -h a.test -p 443 -d "sql:$1" \
	    -A "$REQ" 2>&1
}
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(nss_get "$NSS")
tb_expect_match "tstclnt (NSS) with the database reaches the bound host: 200" \
    'HTTP/1.1 200' "$out"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/nss \
    "h.authorization=Bearer $SECRET"
tb_check "an empty NSS database" tb_sandbox sh -c \
    "mkdir '$T/empty' && certutil -N -d 'sql:$T/empty' --empty-password"
tb_expect_match "... tstclnt without the CA: SEC_ERROR_UNKNOWN_ISSUER" \
    'SEC_ERROR_UNKNOWN_ISSUER' "$(nss_get "$T/empty")"

# --- a re-run changes nothing -----------------------------------------------------
tb_check "egressd-ca-install again (the pod's init container run again)" install
tb_expect_eq "... the truststore: the same entries, the same CA" \
    "$((n_src + 1)) $CA1" "$(jks_state)"
tb_expect_eq "... the NSS database: still one egressd-ca" "1 $CA1" "$(nss_state)"

# --- a rotated CA -------------------------------------------------------------------
# egressd on a new CA (its state directory emptied: a new pod, or the
# operator's new --ca-cert): the old stores no longer verify its leaves
tb_stop_egressd
rm -f "$STATE/ca.key" "$STATE/ca.crt"
start
CA2=$(fp "$STATE/ca.crt")
tb_check_fails "a new CA" test "$CA1" = "$CA2"
tb_expect_match "Java on the old truststore: PKIX fails" \
    "$PKIX" "$(jget "$JOPTS" https://a.test/v1/rot)"
tb_expect_match "tstclnt on the old database: SEC_ERROR_UNKNOWN_ISSUER" \
    'SEC_ERROR_UNKNOWN_ISSUER' "$(nss_get "$NSS")"
tb_check "egressd-ca-install on the new bundle" install
tb_expect_eq "... the truststore holds the new CA instead of the old" \
    "$((n_src + 1)) $CA2" "$(jks_state)"
tb_expect_eq "... the NSS database: one egressd-ca, the new one" "1 $CA2" \
    "$(nss_state)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(jget "$JOPTS" https://a.test/v1/rot 'Authorization: Bearer fake-key')
tb_expect_match "Java on the new truststore: 200" '^STATUS 200 ' "$out"
tb_expect_match "tstclnt on the new database: 200" 'HTTP/1.1 200' \
    "$(nss_get "$NSS")"
tb_assert_log --since "$mark" --min 2 "$TB_ORIGIN_LOG" origin.request \
    "h.authorization=Bearer $SECRET"

tb_finish
