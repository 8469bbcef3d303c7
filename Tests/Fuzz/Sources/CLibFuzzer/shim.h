// libFuzzer's driver, from the fuzzer runtime that `-sanitize=fuzzer` links (compiler-rt's FuzzerInterface.h).
//
// SwiftPM links every Swift executable with `--defsym main=<Target>_main`, so libFuzzer's own `main` is never
// used; each harness defines `<Target>_main` and hands its test function to this driver instead.
#ifndef CLIBFUZZER_SHIM_H
#define CLIBFUZZER_SHIM_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));

#endif
