/*
 * fake_mspti.c — a TEST DOUBLE of Huawei's MSPTI activity API (libmspti.so), for tests and benchmarks
 * on machines without an Ascend NPU. It is not MSPTI and collects nothing: it invents records.
 *
 * It exports the functions the Python binding uses, with MSPTI's signatures and result codes, and
 * writes records with MSPTI's exact packed layouts (the structs below are declared as in the MSPTI
 * headers: packed, aligned(8)), from a thread of its own, into buffers obtained through the client's
 * request callback, handed back through its complete callback.
 *
 * Configuration, read at msptiSubscribe (environment variables):
 *   FAKE_MSPTI_COUNT     records ("events") to generate per session, 0 = no limit (default 0)
 *   FAKE_MSPTI_RATE      events per second, 0 = as fast as possible (default 0)
 *   FAKE_MSPTI_NAMES     distinct names per kind (default 16)
 *   FAKE_MSPTI_NULL_EVERY  every Nth event of a kind has a NULL name (0 = never; default 0)
 *   FAKE_MSPTI_DEVICES   devices to spread device-side records over (default 1)
 *   FAKE_MSPTI_DELIVER   "full": full buffers are completed at once, from the producer thread;
 *                        "flush": buffers are held until msptiActivityFlushAll (default "full")
 *   FAKE_MSPTI_RECORD_PAD  extra bytes after every record, as a newer library with larger records
 *                        would write; msptiActivityGetNextRecord steps over them (default 0)
 *   FAKE_MSPTI_START_KINDS  the first event waits until this many kinds are enabled, so that kinds
 *                        enabled one after the other all take part from the first event whatever the
 *                        scheduler does (default 0: from the first msptiActivityEnable)
 *   FAKE_MSPTI_REQUIRE_PRELOAD  1: enabling Hccl/Memory/MemSet/MemCpy fails with
 *                        MSPTI_ERROR_WITHOUT_LD_PRELOAD unless LD_PRELOAD names libmspti, as MSPTI
 *                        does (default 1)
 *
 * Events: event i has kind kinds[i % n] over the enabled kinds (ascending), j = i / n, name index
 * j % NAMES, device j % DEVICES, duration 1000 + 100 * name index ns. A Marker event is a complete range
 * with device: 4 records (host start, device start, device end, host end). Names are "<Kind>_<index>"
 * (Kernel_3, API_3, Marker_3, ...). Every buffer gets its own copy of the strings, freed (after being
 * overwritten) as soon as the complete callback returns: a client that keeps a pointer reads garbage.
 *
 * Test hooks: fakeMsptiEvents, fakeMsptiProduced (records written), fakeMsptiDropped (records lost to
 * declined buffer requests), fakeMsptiDone (1 once COUNT events were generated).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int msptiResult;
enum { MSPTI_SUCCESS = 0, MSPTI_ERROR_INVALID_PARAMETER = 1, MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 2,
       MSPTI_ERROR_MAX_LIMIT_REACHED = 3, MSPTI_ERROR_WITHOUT_LD_PRELOAD = 6 };
enum { K_MARKER = 1, K_KERNEL, K_API, K_HCCL, K_MEMORY, K_MEMSET, K_MEMCPY, K_EXTCORR, K_COMMUNICATION,
       K_ACL_API, K_NODE_API, K_RUNTIME_API, K_COUNT };
enum { F_START_DEV = 16, F_END_DEV = 32 };

#define PACKED __attribute__((packed, aligned(8)))
typedef struct { uint32_t deviceId; uint32_t streamId; } DS; /* nested structs are not packed in the header */
typedef struct { uint32_t processId; uint32_t threadId; } PT;
typedef struct PACKED { int kind; } Activity;
typedef struct PACKED { int kind; uint64_t start, end; DS ds; uint64_t correlationId; const char *type; const char *name; } Kernel;
typedef struct PACKED { int kind; uint64_t start, end; PT pt; uint64_t correlationId; const char *name; } Api;
typedef struct PACKED { int kind; uint64_t start, end; DS ds; double bandWidth; const char *name; const char *commName; } Hccl;
typedef struct PACKED { int kind; int dataType; uint64_t count; DS ds; uint64_t start, end; const char *algType;
                        const char *name; const char *commName; uint64_t correlationId; } Communication;
typedef struct PACKED { int kind; int flag; int sourceKind; uint64_t timestamp; uint64_t id;
                        union { PT pt; DS ds; } objectId; const char *name; const char *domain; } Marker;
typedef struct PACKED { int kind; int memoryOperationType; int memoryKind; uint64_t correlationId; uint64_t start, end;
                        uint64_t address; uint64_t bytes; uint32_t processId; uint32_t deviceId; uint32_t streamId; } Memory;
typedef struct PACKED { int kind; uint32_t value; uint64_t bytes; uint64_t start, end; uint32_t deviceId, streamId;
                        uint64_t correlationId; uint8_t isAsync; } Memset;
typedef struct PACKED { int kind; int copyKind; uint64_t bytes; uint64_t start, end; uint32_t deviceId, streamId;
                        uint64_t correlationId; uint8_t isAsync; } Memcpy;
typedef struct PACKED { int kind; int externalKind; uint64_t externalId; uint64_t correlationId; } ExternalCorrelation;

typedef void (*RequestFn)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void (*CompleteFn)(uint8_t *buffer, size_t size, size_t validSize);

static const char *LABELS[K_COUNT] = {"", "Marker", "Kernel", "API", "Hccl", "Memory", "MemSet", "MemCpy", "",
                                      "Communication", "AclAPI", "NodeAPI", "RuntimeAPI"};
#define NAME_BYTES 32

typedef struct Pending { uint8_t *buf; size_t size, used; char *arena; struct Pending *next; } Pending;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static RequestFn g_request;
static CompleteFn g_complete;
static int g_subscribed, g_running, g_enabled[K_COUNT];
static pthread_t g_thread;
static uint64_t g_start_kinds, g_count, g_rate, g_names = 16, g_null_every, g_devices = 1, g_pad, g_flush_only, g_require_preload = 1;
static volatile uint64_t g_events, g_produced, g_dropped;
static volatile int g_done;
static Pending g_cur;        /* the buffer being filled */
static Pending *g_full_head; /* full buffers waiting for a flush (FAKE_MSPTI_DELIVER=flush) */
static uint64_t g_base_ns;

static uint64_t env_u64(const char *name, uint64_t dflt) {
    const char *v = getenv(name);
    return (v && *v) ? strtoull(v, NULL, 10) : dflt;
}
static uint64_t now_ns(int clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static size_t record_size(int kind) {
    switch (kind) {
    case K_KERNEL: return sizeof(Kernel);
    case K_API: case K_ACL_API: case K_NODE_API: case K_RUNTIME_API: return sizeof(Api);
    case K_HCCL: return sizeof(Hccl);
    case K_MEMORY: return sizeof(Memory);
    case K_MEMSET: return sizeof(Memset);
    case K_MEMCPY: return sizeof(Memcpy);
    case K_EXTCORR: return sizeof(ExternalCorrelation);
    case K_COMMUNICATION: return sizeof(Communication);
    case K_MARKER: return sizeof(Marker);
    default: return 0;
    }
}

/* Strings for one buffer: names[kind][index], plus a few fixed ones at the end. */
enum { FIX_TYPE, FIX_COMM, FIX_ALG, FIX_DOMAIN, FIX_N };
static char *new_arena(void) {
    size_t n = K_COUNT * g_names + FIX_N;
    char *arena = malloc(n * NAME_BYTES);
    for (int k = 0; k < K_COUNT; k++)
        for (uint64_t i = 0; i < g_names; i++)
            snprintf(arena + (k * g_names + i) * NAME_BYTES, NAME_BYTES, "%s_%llu", LABELS[k], (unsigned long long)i);
    const char *fixed[FIX_N] = {"KERNEL_AIVEC", "group_0", "RING", "fake_domain"};
    for (int f = 0; f < FIX_N; f++) snprintf(arena + (K_COUNT * g_names + f) * NAME_BYTES, NAME_BYTES, "%s", fixed[f]);
    return arena;
}
static const char *name_of(const Pending *p, int kind, uint64_t idx) { return p->arena + (kind * g_names + idx) * NAME_BYTES; }
static const char *fixed_of(const Pending *p, int f) { return p->arena + (K_COUNT * g_names + f) * NAME_BYTES; }
static void free_arena(char *arena) {
    memset(arena, 'Z', (K_COUNT * g_names + FIX_N) * NAME_BYTES - 1);
    free(arena);
}

static void complete(Pending *p) {
    g_complete(p->buf, p->size, p->used);
    free_arena(p->arena);
}

/* Called with g_lock held; may release it to deliver a full buffer. Returns space for one record. */
static uint8_t *reserve(size_t need) {
    if (g_cur.buf && g_cur.used + need > g_cur.size) {
        Pending *full = malloc(sizeof(Pending));
        *full = g_cur;
        memset(&g_cur, 0, sizeof(g_cur));
        if (g_flush_only) {
            Pending **tail = &g_full_head;
            while (*tail) tail = &(*tail)->next;
            *tail = full;
        } else {
            pthread_mutex_unlock(&g_lock);
            complete(full);
            free(full);
            pthread_mutex_lock(&g_lock);
        }
    }
    if (!g_cur.buf) {
        uint8_t *buf = NULL;
        size_t size = 0, max_records = 0;
        pthread_mutex_unlock(&g_lock);
        g_request(&buf, &size, &max_records);
        pthread_mutex_lock(&g_lock);
        if (!buf || size < need) return NULL;
        g_cur.buf = buf;
        g_cur.size = size;
        g_cur.used = 0;
        g_cur.arena = new_arena();
    }
    uint8_t *at = g_cur.buf + g_cur.used;
    memset(at, 0, need);
    g_cur.used += need;
    return at;
}

#define RESERVE(T, var, kind_)                          \
    T *var = (T *)reserve(sizeof(T) + g_pad);           \
    if (!var) { g_dropped++; return; }                  \
    g_produced++;                                       \
    var->kind = (kind_)

static void write_marker_point(uint64_t j, uint64_t idx, int flag, int device_side, uint64_t ts, int null_name, uint32_t dev) {
    RESERVE(Marker, m, K_MARKER);
    m->flag = flag;
    m->sourceKind = device_side;
    m->timestamp = ts;
    m->id = j + 1;
    if (device_side) {
        m->objectId.ds.deviceId = dev;
        m->objectId.ds.streamId = 7;
    } else {
        m->objectId.pt.processId = (uint32_t)getpid();
        m->objectId.pt.threadId = (uint32_t)syscall(SYS_gettid);
    }
    if (!device_side && flag == F_START_DEV) {  /* only the host start carries name and domain */
        m->name = null_name ? NULL : name_of(&g_cur, K_MARKER, idx);
        m->domain = fixed_of(&g_cur, FIX_DOMAIN);
    }
}

static void write_event(int kind, uint64_t i, uint64_t j) {
    uint64_t idx = j % g_names, dur = 1000 + 100 * idx;
    uint64_t start = g_base_ns + i * 10000, end = start + dur;
    uint32_t dev = (uint32_t)(j % g_devices);
    int null_name = g_null_every && (j % g_null_every) == g_null_every - 1;
    switch (kind) {
    case K_KERNEL: {
        RESERVE(Kernel, r, kind);
        r->start = start; r->end = end; r->ds.deviceId = dev; r->ds.streamId = 3; r->correlationId = i + 1;
        r->type = fixed_of(&g_cur, FIX_TYPE); r->name = null_name ? NULL : name_of(&g_cur, kind, idx);
        break;
    }
    case K_API: case K_ACL_API: case K_NODE_API: case K_RUNTIME_API: {
        RESERVE(Api, r, kind);
        r->start = start; r->end = end; r->pt.processId = (uint32_t)getpid(); r->pt.threadId = (uint32_t)syscall(SYS_gettid);
        r->correlationId = i + 1; r->name = null_name ? NULL : name_of(&g_cur, kind, idx);
        break;
    }
    case K_HCCL: {
        RESERVE(Hccl, r, kind);
        r->start = start; r->end = end; r->ds.deviceId = dev; r->ds.streamId = 4; r->bandWidth = 12.5;
        r->name = null_name ? NULL : name_of(&g_cur, kind, idx); r->commName = fixed_of(&g_cur, FIX_COMM);
        break;
    }
    case K_COMMUNICATION: {
        RESERVE(Communication, r, kind);
        r->dataType = 3; r->count = 1024; r->ds.deviceId = dev; r->ds.streamId = 5; r->start = start; r->end = end;
        r->algType = fixed_of(&g_cur, FIX_ALG); r->name = null_name ? NULL : name_of(&g_cur, kind, idx);
        r->commName = fixed_of(&g_cur, FIX_COMM); r->correlationId = i + 1;
        break;
    }
    case K_MEMORY: {
        RESERVE(Memory, r, kind);
        r->memoryOperationType = (int)(j % 2); r->memoryKind = 1; r->correlationId = i + 1; r->start = start; r->end = end;
        r->address = 0x1000 + j; r->bytes = 4096; r->processId = (uint32_t)getpid(); r->deviceId = dev; r->streamId = 6;
        break;
    }
    case K_MEMSET: {
        RESERVE(Memset, r, kind);
        r->value = 0; r->bytes = 4096; r->start = start; r->end = end; r->deviceId = dev; r->streamId = 6;
        r->correlationId = i + 1; r->isAsync = (uint8_t)(j % 2);
        break;
    }
    case K_MEMCPY: {
        RESERVE(Memcpy, r, kind);
        r->copyKind = (int)(1 + j % 4); r->bytes = 8192; r->start = start; r->end = end; r->deviceId = dev;
        r->streamId = 6; r->correlationId = i + 1; r->isAsync = 1;
        break;
    }
    case K_MARKER:
        write_marker_point(j, idx, F_START_DEV, 0, start, null_name, dev);
        write_marker_point(j, idx, F_START_DEV, 1, start + 10, null_name, dev);
        write_marker_point(j, idx, F_END_DEV, 1, end + 10, null_name, dev);
        write_marker_point(j, idx, F_END_DEV, 0, end, null_name, dev);
        break;
    }
}

static void *producer(void *arg) {
    (void)arg;
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    while (1) {
        pthread_mutex_lock(&g_lock);
        if (!g_running) { pthread_mutex_unlock(&g_lock); break; }
        int kinds[K_COUNT], n = 0;
        for (int k = 1; k < K_COUNT; k++)
            if (g_enabled[k]) kinds[n++] = k;
        if (!g_events && (uint64_t)n < g_start_kinds) n = 0; /* not all the kinds yet: wait */
        uint64_t target = g_rate ? (now_ns(CLOCK_MONOTONIC) - t0) / 1000 * g_rate / 1000000 : g_events + 4096;
        if (g_count && target > g_count) target = g_count;
        while (n && g_events < target && g_running) {
            uint64_t i = g_events++;
            write_event(kinds[i % n], i, i / n);
        }
        if (g_count && g_events >= g_count) g_done = 1;
        pthread_mutex_unlock(&g_lock);
        if (!n || g_done || g_rate) usleep(1000);
    }
    return NULL;
}

msptiResult msptiSubscribe(void **subscriber, void *callback, void *userdata) {
    (void)callback; (void)userdata;
    pthread_mutex_lock(&g_lock);
    if (g_subscribed) { pthread_mutex_unlock(&g_lock); return MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; }
    g_subscribed = 1;
    g_count = env_u64("FAKE_MSPTI_COUNT", 0);
    g_rate = env_u64("FAKE_MSPTI_RATE", 0);
    g_names = env_u64("FAKE_MSPTI_NAMES", 16); if (!g_names) g_names = 1;
    g_null_every = env_u64("FAKE_MSPTI_NULL_EVERY", 0);
    g_devices = env_u64("FAKE_MSPTI_DEVICES", 1); if (!g_devices) g_devices = 1;
    g_pad = env_u64("FAKE_MSPTI_RECORD_PAD", 0);
    g_start_kinds = env_u64("FAKE_MSPTI_START_KINDS", 0);
    g_require_preload = env_u64("FAKE_MSPTI_REQUIRE_PRELOAD", 1);
    const char *deliver = getenv("FAKE_MSPTI_DELIVER");
    g_flush_only = deliver && strcmp(deliver, "flush") == 0;
    g_events = g_produced = g_dropped = 0;
    g_done = 0;
    memset(g_enabled, 0, sizeof(g_enabled));
    g_base_ns = now_ns(CLOCK_REALTIME);
    *subscriber = (void *)&g_subscribed;
    pthread_mutex_unlock(&g_lock);
    return MSPTI_SUCCESS;
}

msptiResult msptiActivityFlushAll(uint32_t flag);

msptiResult msptiUnsubscribe(void *subscriber) {
    if (subscriber != (void *)&g_subscribed || !g_subscribed) return MSPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    int running = g_running;
    g_running = 0;
    pthread_mutex_unlock(&g_lock);
    if (running) pthread_join(g_thread, NULL);
    msptiActivityFlushAll(1);
    pthread_mutex_lock(&g_lock);
    g_subscribed = 0;
    g_request = NULL;
    g_complete = NULL;
    pthread_mutex_unlock(&g_lock);
    return MSPTI_SUCCESS;
}

msptiResult msptiActivityRegisterCallbacks(RequestFn request, CompleteFn complete_fn) {
    if (!request || !complete_fn) return MSPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    g_request = request;
    g_complete = complete_fn;
    pthread_mutex_unlock(&g_lock);
    return MSPTI_SUCCESS;
}

static int needs_preload(int kind) {
    if (!g_require_preload) return 0;
    if (kind != K_HCCL && kind != K_MEMORY && kind != K_MEMSET && kind != K_MEMCPY) return 0;
    const char *preload = getenv("LD_PRELOAD");
    return !(preload && strstr(preload, "libmspti"));
}

msptiResult msptiActivityEnable(int kind) {
    if (kind <= 0 || kind >= K_COUNT) return MSPTI_ERROR_INVALID_PARAMETER;
    if (needs_preload(kind)) return MSPTI_ERROR_WITHOUT_LD_PRELOAD;
    pthread_mutex_lock(&g_lock);
    g_enabled[kind] = 1;
    int start = g_subscribed && g_request && !g_running;
    if (start) {
        g_running = 1;
        pthread_create(&g_thread, NULL, producer, NULL);
    }
    pthread_mutex_unlock(&g_lock);
    return MSPTI_SUCCESS;
}

msptiResult msptiActivityDisable(int kind) {
    if (kind <= 0 || kind >= K_COUNT) return MSPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    g_enabled[kind] = 0;
    pthread_mutex_unlock(&g_lock);
    return MSPTI_SUCCESS;
}

msptiResult msptiActivityEnableMarkerDomain(const char *name) { return name ? MSPTI_SUCCESS : MSPTI_ERROR_INVALID_PARAMETER; }
msptiResult msptiActivityDisableMarkerDomain(const char *name) { return name ? MSPTI_SUCCESS : MSPTI_ERROR_INVALID_PARAMETER; }
msptiResult msptiActivityFlushPeriod(uint32_t ms) { (void)ms; return MSPTI_SUCCESS; }

/* Deliver every held buffer and the partially filled one, on the calling thread (as CUPTI does). */
msptiResult msptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    pthread_mutex_lock(&g_lock);
    if (!g_complete) { pthread_mutex_unlock(&g_lock); return MSPTI_SUCCESS; }
    Pending *list = g_full_head;
    g_full_head = NULL;
    if (g_cur.buf) {
        Pending *cur = malloc(sizeof(Pending));
        *cur = g_cur;
        cur->next = NULL;
        memset(&g_cur, 0, sizeof(g_cur));
        Pending **tail = &list;
        while (*tail) tail = &(*tail)->next;
        *tail = cur;
    }
    pthread_mutex_unlock(&g_lock);
    while (list) {
        Pending *next = list->next;
        complete(list);
        free(list);
        list = next;
    }
    return MSPTI_SUCCESS;
}

msptiResult msptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, Activity **record) {
    if (!buffer || !record) return MSPTI_ERROR_INVALID_PARAMETER;
    uint8_t *next = buffer;
    if (*record) {
        size_t size = record_size((*record)->kind);
        if (!size) return MSPTI_ERROR_INVALID_PARAMETER;
        next = (uint8_t *)*record + size + g_pad;
    }
    if (next + sizeof(Activity) > buffer + validBufferSizeBytes) return MSPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (Activity *)next;
    return MSPTI_SUCCESS;
}

uint64_t fakeMsptiEvents(void) { return g_events; }
uint64_t fakeMsptiProduced(void) { return g_produced; }
uint64_t fakeMsptiDropped(void) { return g_dropped; }
int fakeMsptiDone(void) { return g_done; }
