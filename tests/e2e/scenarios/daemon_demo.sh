#!/bin/bash
# daemon_demo: `./run demo` stays a working tour: every step of tests/e2e/demo.sh
# checks itself, and it must end with none failed.
exec bash "$(dirname "$0")/../demo.sh" "${EGRESSD_BIN:-}"
