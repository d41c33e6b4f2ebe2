// libFuzzer's entry point for programs that keep their own main (compiler-rt
// FuzzerInterface.h). SwiftPM links an executable's main as <module>_main, which
// collides with libFuzzer's main; the Swift main calls this instead.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));
