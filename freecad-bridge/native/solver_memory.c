/*
 * Gives FreeCAD's sketch solver its memory in the order it asks for it.
 *
 * Preloaded into every FreeCAD worker with solver_threads.c (see src/worker.rs). The
 * solver (planegcs, inside Sketcher.so) orders a sketch's unknowns by their memory address:
 * it gathers them in a std::set<double *>. Each unknown is a `new double`, and where the
 * allocator puts it depends on everything the process freed before. For a sketch the
 * solver has to move and that does not pin every coordinate, the Gauss-Newton step picks
 * its pivots in that order, so the same drawing landed up to 0.01 mm apart from one worker
 * to the next (12 different solutions in 12 tries of one sketch after different work).
 *
 * Here every `operator new` called from Sketcher.so's own code takes its block from one
 * reserved region, always above every block of the region still in use, so the unknowns
 * are ordered as the sketch creates them, whatever the process did before (the same
 * sketch, 12 tries after different work: one solution). Deleted blocks are used again
 * only once nothing above them is in use (the top comes down), and a page emptied below
 * the top goes back to the kernel. Every other allocation, and every delete of memory not
 * from the region, goes to the C++ runtime as before. If the region cannot be reserved,
 * or is full, the runtime serves the solver too: it still works, in address order again.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Address space only: pages are backed when first touched. */
#define REGION_BYTES ((size_t)16 << 30)
#define PAGE_BYTES ((size_t)4096)
#define PAGES (REGION_BYTES / PAGE_BYTES)
/* Before each block, its size (operator new's blocks are 16-byte aligned). */
#define HEADER_BYTES ((size_t)16)

typedef void *(*new_fn)(size_t);
typedef void (*delete_fn)(void *);

static char *region;          /* REGION_BYTES reserved, or NULL if that failed */
static uint32_t *live;        /* blocks touching each page of the region */
static size_t next_offset;    /* above every block in use: where the next one starts */
static uintptr_t solver_lo, solver_hi; /* Sketcher.so's code, once it is loaded */
static int region_failed;

static int find_solver(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "/Sketcher.so") == NULL) {
        return 0;
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            solver_lo = info->dlpi_addr + ph->p_vaddr;
            solver_hi = solver_lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* Whether the code at `caller` is Sketcher.so's. Its code range is looked up once the
 * library is loaded (see dlopen below); before that, nothing is the solver's. */
static int from_solver(uintptr_t caller) {
    return caller >= solver_lo && caller < solver_hi;
}

typedef void *(*dlopen_fn)(const char *, int);

/* Python loads FreeCAD's modules with dlopen, and Sketcher.so may come in as another
 * module's dependency: after each load, until it is found, look for it. (Asking dladdr
 * about every caller instead cost 14% of a worker's time.) */
void *dlopen(const char *file, int mode) {
    static dlopen_fn real;
    if (real == NULL) {
        real = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    }
    void *handle = real(file, mode);
    if (handle != NULL && solver_hi == 0) {
        dl_iterate_phdr(find_solver, NULL);
    }
    return handle;
}

static int reserve(void) {
    if (region != NULL) {
        return 1;
    }
    if (region_failed) {
        return 0;
    }
    void *r = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *l = mmap(NULL, PAGES * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED || l == MAP_FAILED) {
        region_failed = 1;
        return 0;
    }
    region = r;
    live = l;
    return 1;
}

static int in_region(const void *p) {
    return region != NULL && (const char *)p >= region && (const char *)p < region + REGION_BYTES;
}

/* FreeCAD works in one thread; the lock only keeps a stray one from tearing the counts. */
static int lock_word;

static void lock(void) {
    while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE)) {
    }
}

static void unlock(void) {
    __atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}

/* The next block of the region, above every block still in use; NULL when the region
 * cannot serve it. */
static void *take(size_t size) {
    size_t need = HEADER_BYTES + ((size + 15) & ~(size_t)15);
    if (!reserve()) {
        return NULL;
    }
    lock();
    size_t start = next_offset;
    if (start + need > REGION_BYTES) {
        unlock();
        return NULL;
    }
    next_offset = start + need;
    for (size_t page = start / PAGE_BYTES; page <= (start + need - 1) / PAGE_BYTES; page++) {
        live[page]++;
    }
    unlock();
    *(size_t *)(region + start) = need;
    return region + start + HEADER_BYTES;
}

static void give_back(void *p) {
    size_t start = (size_t)((char *)p - region) - HEADER_BYTES;
    size_t need = *(size_t *)(region + start);
    lock();
    for (size_t page = start / PAGE_BYTES; page <= (start + need - 1) / PAGE_BYTES; page++) {
        /* A page below the top with nothing left on it goes back to the kernel. */
        if (--live[page] == 0 && (page + 1) * PAGE_BYTES <= next_offset) {
            madvise(region + page * PAGE_BYTES, PAGE_BYTES, MADV_DONTNEED);
        }
    }
    /* The top comes down to just above the highest block still in use (the block itself
     * if it was the last one handed out, then page by page), so the region is used again
     * and the next block is still above every live one. */
    if (start + need == next_offset) {
        next_offset = start;
    }
    while (next_offset > 0 && live[(next_offset - 1) / PAGE_BYTES] == 0) {
        next_offset = (next_offset - 1) / PAGE_BYTES * PAGE_BYTES;
    }
    unlock();
}

#define CALLER ((uintptr_t)__builtin_return_address(0))

/* Where `new` was called from is read in the operator itself, so each is written out by
 * the macro rather than sharing a helper. */
#define NEW(name)                                              \
    void *name(size_t size) {                                  \
        static new_fn real;                                    \
        if (from_solver(CALLER)) {                             \
            void *p = take(size);                              \
            if (p != NULL) {                                   \
                return p;                                      \
            }                                                  \
        }                                                      \
        if (real == NULL) {                                    \
            real = (new_fn)dlsym(RTLD_NEXT, #name);            \
        }                                                      \
        return real(size);                                     \
    }

NEW(_Znwm)
NEW(_Znam)

#define DELETE(name)                                           \
    void name(void *p) {                                       \
        static delete_fn real;                                 \
        if (in_region(p)) {                                    \
            give_back(p);                                      \
            return;                                            \
        }                                                      \
        if (real == NULL) {                                    \
            real = (delete_fn)dlsym(RTLD_NEXT, #name);         \
        }                                                      \
        real(p);                                               \
    }

DELETE(_ZdlPv)
DELETE(_ZdaPv)

/* The sized deletes: the runtime's own only frees, so the size is not passed on. */
void _ZdlPvm(void *p, size_t size) {
    (void)size;
    _ZdlPv(p);
}

void _ZdaPvm(void *p, size_t size) {
    (void)size;
    _ZdaPv(p);
}
