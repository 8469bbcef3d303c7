#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "test_support.h"

int caregiver_push_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}
