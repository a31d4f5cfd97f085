#!/bin/bash
# dns_connect_race: an answer is usable the instant it arrives. egressd
# learns every address before it releases the answer, so a client that
# connects the moment getaddrinfo returns never loses the race against the
# allow set. Leases are 1 s here (dns.ttlMin/ttlMax), and the loop spaces
# reuse of an address by more than that, so (almost) every connect depends
# on the learning done for its own query, fresh or from the cache.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
dns:
  ttlMin: 1
  ttlMax: 1
EOF
)
tb_start_egressd --policy "$pol"

# 120 rounds (20 passes) over 6 (name, family) pairs with 6 distinct
# addresses, 0.25 s apart: each address comes back every 1.5 s, after its
# 1 s lease.
race=$(tb_sandbox "$TB_PY" - <<'EOF'
import socket, time
pairs = [("a.test", socket.AF_INET), ("b.test", socket.AF_INET6),
         ("c.test", socket.AF_INET), ("a.test", socket.AF_INET6),
         ("b.test", socket.AF_INET), ("c.test", socket.AF_INET6)]
ok = fail = 0
errs = []
for i in range(120):
    name, fam = pairs[i % len(pairs)]
    try:
        ai = socket.getaddrinfo(name, 80, fam, socket.SOCK_STREAM)
    except OSError as e:
        fail += 1; errs.append("%s resolve %s" % (name, e)); continue
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(ai[0][4])   # no pause between answer and connect
        ok += 1
    except OSError as e:
        fail += 1; errs.append("%s %s %s" % (name, ai[0][4][0], e))
    finally:
        s.close()
    time.sleep(0.25)
print(ok, fail, "; ".join(errs[:5]))
EOF
)
tb_expect_match "120 resolve-then-connect rounds, none lost the race" \
    "^120 0 " "$race"

# The leases really are short: without a fresh answer the same address is
# closed again (so the rounds above did depend on their own learning).
tb_check "a learned address connects right after its answer" \
    tb_sandbox "$TB_PY" -c 'import socket
socket.getaddrinfo("b.test", 80, socket.AF_INET)
socket.create_connection(("203.0.113.11", 80), timeout=2).close()'
tb_check_fails "and is closed once its 1 s lease is over" \
    tb_sandbox "$TB_PY" -c 'import socket, time
time.sleep(2.5)
socket.create_connection(("203.0.113.11", 80), timeout=2).close()'
tb_assert_no_log "$TB_EGRESSD_LOG" dns.learn_failed
tb_finish
