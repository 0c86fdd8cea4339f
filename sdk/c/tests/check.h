/* A minimal test harness for the SDK's native tests (see run.sh). */
#ifndef TOOLHOST_CHECK_H
#define TOOLHOST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        check_count++;                                                                \
        if (!(cond)) {                                                                \
            check_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

/* Two NUL-terminated strings are equal (either may be NULL: then unequal). */
#define CHECK_STR(got, want)                                                          \
    do {                                                                              \
        const char *g_ = (got), *w_ = (want);                                         \
        check_count++;                                                                \
        if (!g_ || !w_ || strcmp(g_, w_) != 0) {                                      \
            check_failures++;                                                         \
            fprintf(stderr, "%s:%d: %s\n  got:  %s\n  want: %s\n", __FILE__, __LINE__, \
                    #got, g_ ? g_ : "(null)", w_ ? w_ : "(null)");                    \
        }                                                                             \
    } while (0)

#define CHECK_DONE()                                                                  \
    do {                                                                              \
        printf("%s: %d checks, %d failed\n", __FILE__, check_count, check_failures);  \
        return check_failures ? 1 : 0;                                                \
    } while (0)

#endif
