// Linked into the Lambda builds only (scripts/release.sh), so that nothing in a zip needs a glibc symbol version
// newer than Amazon Linux 2023's 2.34. The build machine's glibc (Debian 12: 2.36) gives three references newer
// versions; the linker's --wrap=NAME sends them here instead:
//
//   hypot, hypotf  GLIBC_2.35 (a new implementation; the GLIBC_2.2.5 one every glibc has is the same function)
//   arc4random     GLIBC_2.36 (new in 2.36: GCC 12's static libstdc++ uses it for std::random_device)
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

__asm__(".symver hypot_glibc_2_2_5, hypot@GLIBC_2.2.5");
__asm__(".symver hypotf_glibc_2_2_5, hypotf@GLIBC_2.2.5");
double hypot_glibc_2_2_5(double x, double y);
float hypotf_glibc_2_2_5(float x, float y);

double __wrap_hypot(double x, double y) { return hypot_glibc_2_2_5(x, y); }
float __wrap_hypotf(float x, float y) { return hypotf_glibc_2_2_5(x, y); }

// getrandom(2) (GLIBC_2.25) with the kernel's CSPRNG, as glibc 2.36's arc4random does; retried when interrupted.
uint32_t __wrap_arc4random(void) {
    uint32_t value = 0;
    for (;;) {
        ssize_t got = getrandom(&value, sizeof value, 0);
        if (got == (ssize_t)sizeof value) return value;
        if (got < 0 && errno != EINTR) __builtin_trap();  // no randomness: fail loudly, never return a constant
    }
}
