#define _GNU_SOURCE
#include <stddef.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "process_limits.h"

int caregiver_push_limit_data(pid_t pid, unsigned long long bytes) {
    struct rlimit limit = {.rlim_cur = (rlim_t)bytes, .rlim_max = (rlim_t)bytes};
    return prlimit(pid, RLIMIT_DATA, &limit, NULL);
}

int caregiver_push_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}
