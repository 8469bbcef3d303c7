#ifndef CAREGIVER_PUSH_PROCESS_LIMITS_H
#define CAREGIVER_PUSH_PROCESS_LIMITS_H

#include <sys/types.h>

/// Sets the data-segment limit (RLIMIT_DATA: heap, and private writable mappings since Linux 4.7) of the running
/// process `pid`, soft and hard, to `bytes`. Returns 0, or -1 with errno set. Linux's prlimit(2), which Swift's
/// Glibc module does not expose (it needs _GNU_SOURCE).
int caregiver_push_limit_data(pid_t pid, unsigned long long bytes);

/// Whether a listener could bind 127.0.0.1:`port` now (with SO_REUSEADDR, as the runner's listener does): 0 when it
/// could, 1 when the port is in use (EADDRINUSE), -1 with errno set on any other failure. Binds nothing lasting.
int caregiver_push_loopback_port_in_use(int port);

#endif
