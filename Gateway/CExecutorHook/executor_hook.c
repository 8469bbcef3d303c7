#include "executor_hook.h"

extern void *swift_task_enqueueGlobal_hook;

void **caregiver_push_enqueue_global_hook(void) {
    return &swift_task_enqueueGlobal_hook;
}
