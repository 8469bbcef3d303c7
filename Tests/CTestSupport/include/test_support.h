#ifndef CAREGIVER_PUSH_TEST_SUPPORT_H
#define CAREGIVER_PUSH_TEST_SUPPORT_H

/// pipe2(fds, O_CLOEXEC): a pipe whose ends no concurrently spawned child inherits (TestSupport's ProcessBurst).
/// Returns 0, or -1 with errno set. pipe2 needs _GNU_SOURCE, which Swift's Glibc module does not define.
int caregiver_push_pipe_cloexec(int fds[2]);

#endif
