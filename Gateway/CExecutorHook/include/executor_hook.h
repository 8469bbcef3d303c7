#ifndef CAREGIVER_PUSH_EXECUTOR_HOOK_H
#define CAREGIVER_PUSH_EXECUTOR_HOOK_H

/// Where the Swift runtime keeps its global executor's enqueue hook (`swift_task_enqueueGlobal_hook`), resolved by
/// the linker. NIO looks the hook up with `dlsym`, which finds only exported symbols: a binary that links the Swift
/// runtime statically (`--static-swift-stdlib` hides the archives' symbols) has the hook but does not export it.
void **caregiver_push_enqueue_global_hook(void);

#endif
