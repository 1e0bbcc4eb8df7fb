/*
 * Runs the helper threads of FreeCAD's sketch solver inline, in the thread that starts them.
 *
 * Preloaded into every FreeCAD worker (LD_PRELOAD, see src/worker.rs). FreeCAD 0.20's
 * solver diagnoses each sketch with a helper thread (GCS::System::diagnose, std::async)
 * that runs beside the main thread. Its allocations and frees interleave with the main
 * thread's by timing, and the solver orders its unknowns by memory address, so an
 * under-constrained sketch that the solver has to move (after an edit moves the edges it is
 * tied to) landed in a different place from run to run of the same program in a fresh
 * process: 5 results in 20 runs on a loaded machine. Run inline, the helper's work happens
 * at the same point of every run: 20 of 20 alike.
 *
 * Only threads started from the solver's own library (a frame in Sketcher.so) run inline;
 * every other thread starts as usual. A helper that ran inline gets an odd handle, which no
 * real thread handle (the address of an aligned thread block) is; joining or detaching it
 * succeeds at once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*join_fn)(pthread_t, void **);
typedef int (*detach_fn)(pthread_t);

static uintptr_t next_handle = 1;

static int ran_inline(pthread_t thread) {
    return ((uintptr_t)thread & 1u) == 1u;
}

/* Whether the caller's stack holds a frame of FreeCAD's sketcher library. */
static int started_by_solver(void) {
    void *frames[12];
    int n = backtrace(frames, 12);
    for (int i = 1; i < n; i++) {
        Dl_info info;
        if (dladdr(frames[i], &info) && info.dli_fname != NULL && strstr(info.dli_fname, "Sketcher") != NULL) {
            return 1;
        }
    }
    return 0;
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
    static create_fn real = NULL;
    if (real == NULL) {
        real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    }
    if (!started_by_solver()) {
        return real(thread, attr, start, arg);
    }
    start(arg);
    *thread = (pthread_t)__atomic_fetch_add(&next_handle, 2, __ATOMIC_RELAXED);
    return 0;
}

int pthread_join(pthread_t thread, void **result) {
    static join_fn real = NULL;
    if (ran_inline(thread)) {
        if (result != NULL) {
            *result = NULL;
        }
        return 0;
    }
    if (real == NULL) {
        real = (join_fn)dlsym(RTLD_NEXT, "pthread_join");
    }
    return real(thread, result);
}

int pthread_detach(pthread_t thread) {
    static detach_fn real = NULL;
    if (ran_inline(thread)) {
        return 0;
    }
    if (real == NULL) {
        real = (detach_fn)dlsym(RTLD_NEXT, "pthread_detach");
    }
    return real(thread);
}
