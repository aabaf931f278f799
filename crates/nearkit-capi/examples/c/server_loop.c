/*
 * A game server's collision loop through nearkit's C API: a generated terrain, 4,000
 * ellipsoid bodies, and every tick: move the bodies (one batched pose update), read every
 * contact, and drop a few swept bodies onto the terrain.
 *
 *   cargo build --release -p nearkit-capi
 *   cc -std=c99 -O2 -I crates/nearkit-capi/include crates/nearkit-capi/examples/c/server_loop.c \
 *      target/release/libnearkit_c.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -o server_loop
 *   ./server_loop [ticks (1000)] [cpu|cuda|auto] [--verbose]
 *
 * The scene is integer arithmetic (positions in units of 2^-16 m) turned into doubles
 * exactly, the same as examples/cpp/server_loop.cpp and examples/rust/scene.rs, so that
 * tests/examples.rs can check this program's contacts, tick by tick, against the Rust API's.
 */
#define _POSIX_C_SOURCE 199309L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nearkit.h"

enum { QUADS = 96, BODIES = 4000, SWEEPS = 16, COARSE = 16 };
static const double UNIT = 65536.0; /* positions are integers in units of 2^-16 m */
static const int64_t ONE = 65536;
static const uint64_t SEED = 0x6e6561726b6974ull;

/* Stops the program with the library's message when a call fails. */
#define CHECK(call)                                                                      \
    do {                                                                                 \
        NkStatus status_ = (call);                                                       \
        if (status_ != NK_STATUS_OK) {                                                   \
            fprintf(stderr, "%s: %s\n", nk_status_name(status_), nk_last_error_message()); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* splitmix64 of (SEED, a, b, c): the scene's only source of numbers. */
static uint64_t hash(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t z = SEED + a * 0x9e3779b97f4a7c15ull + b * 0xd1b54a32d192ed03ull + c * 0x8cb92ba72f3d8dd3ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An integer in [0, n). */
static int64_t rnd(uint64_t a, uint64_t b, uint64_t c, uint64_t n) { return (int64_t)(hash(a, b, c) % n); }

static double metres(int64_t v) { return (double)v / UNIT; }

/* Height of vertex (row, col) in units: value noise up to 4 m plus 3 cm of roughness. */
static int64_t height(int64_t row, int64_t col) {
    int64_t i = row / COARSE, fr = row % COARSE, j = col / COARSE, fc = col % COARSE, n = COARSE;
    return rnd(1, i, j, 1024) * (n - fr) * (n - fc) + rnd(1, i + 1, j, 1024) * fr * (n - fc) +
           rnd(1, i, j + 1, 1024) * (n - fr) * fc + rnd(1, i + 1, j + 1, 1024) * fr * fc +
           rnd(2, row, col, 2048);
}

/* FNV-1a over 64-bit words. */
static uint64_t fnv(uint64_t h, uint64_t w) { return (h ^ w) * 0x00000100000001b3ull; }
static uint64_t bits32(float v) { uint32_t b; memcpy(&b, &v, 4); return b; }
static uint64_t bits64(double v) { uint64_t b; memcpy(&b, &v, 8); return b; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    long ticks = 1000;
    NkDevice device = NK_DEVICE_CPU;
    int verbose = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-v") || !strcmp(argv[a], "--verbose")) verbose = 1;
        else if (!strcmp(argv[a], "cpu")) device = NK_DEVICE_CPU;
        else if (!strcmp(argv[a], "cuda")) device = NK_DEVICE_CUDA;
        else if (!strcmp(argv[a], "auto")) device = NK_DEVICE_AUTO;
        else if ((ticks = strtol(argv[a], NULL, 10)) < 0 || argv[a][strspn(argv[a], "0123456789")] != '\0') {
            fprintf(stderr, "usage: %s [ticks] [cpu|cuda|auto] [--verbose]\n", argv[0]);
            return 2;
        }
    }

    /* The terrain: a heightfield of QUADS x QUADS squares of 1 m, two triangles each. */
    const int cols = QUADS + 1;
    double* vertices = malloc(sizeof(double) * 3 * cols * cols);
    uint32_t* triangles = malloc(sizeof(uint32_t) * 6 * QUADS * QUADS);
    for (int r = 0; r < cols; r++)
        for (int c = 0; c < cols; c++) {
            double* v = vertices + 3 * (r * cols + c);
            v[0] = c, v[1] = r, v[2] = metres(height(r, c));
        }
    for (int r = 0; r < QUADS; r++)
        for (int c = 0; c < QUADS; c++) {
            uint32_t v = r * cols + c, right = v + 1, up = v + cols, *t = triangles + 6 * (r * QUADS + c);
            t[0] = v, t[1] = right, t[2] = up + 1, t[3] = v, t[4] = up + 1, t[5] = up;
        }
    NkWorld* world;
    CHECK(nk_world_new(1.0, &world));
    CHECK(nk_world_set_mesh(world, vertices, (size_t)cols * cols, triangles, (size_t)2 * QUADS * QUADS));
    CHECK(nk_world_set_mesh_layer(world, 1));
    free(vertices);
    free(triangles);

    /* The bodies: their integer state, and the pose arrays handed to the world. */
    static int64_t anchor[BODIES][3], center[BODIES][3], quat[BODIES][4];
    static double radii[BODIES][3], centers[BODIES][3], orientations[BODIES][4];
    static uint32_t ids[BODIES];
    for (uint64_t i = 0; i < BODIES; i++) {
        for (int k = 0; k < 3; k++) radii[i][k] = metres(13107 + rnd(3, i, k, 39322));
        int64_t x = 2 * ONE + rnd(4, i, 0, (QUADS - 4) * ONE), y = 2 * ONE + rnd(4, i, 1, (QUADS - 4) * ONE);
        int64_t z = height((y + ONE / 2) / ONE, (x + ONE / 2) / ONE) + rnd(4, i, 2, ONE);
        int64_t p[3] = {x, y, z};
        for (int k = 0; k < 3; k++) anchor[i][k] = center[i][k] = p[k], centers[i][k] = metres(p[k]);
        for (int k = 0; k < 3; k++) quat[i][k] = rnd(5, i, k, 257) - 128;
        quat[i][3] = 32 + rnd(5, i, 3, 97);
        for (int k = 0; k < 4; k++) orientations[i][k] = quat[i][k] / 128.0;
        uint32_t layer = 1u << (i % 3), mask = i % 7 == 6 ? ~2u : 0xffffffffu;
        CHECK(nk_world_add_ellipsoid(world, centers[i], radii[i], orientations[i], layer, mask, &ids[i]));
    }

    NkCollider* collider;
    CHECK(nk_collider_new(device, &collider));
    const char* where;
    CHECK(nk_collider_describe(collider, &where));
    size_t body_count, triangle_count;
    CHECK(nk_world_body_count(world, &body_count));
    CHECK(nk_world_triangle_count(world, &triangle_count));
    printf("server_loop (C): %zu bodies, %zu triangles, %s, %ld ticks\n", body_count, triangle_count, where, ticks);

    NkSweep sweeps[SWEEPS];
    NkSweepResult hits[SWEEPS];
    double api = 0, whole = 0, total = 0, phase[4] = {0, 0, 0, 0};
    uint64_t run = 0xcbf29ce484222325ull;
    for (long tick = 0; tick < ticks; tick++) {
        double t0 = now();
        /* Move: each body steps up to 3 cm an axis, drawn back to its anchor, and turns. */
        for (uint64_t i = 0; i < BODIES; i++) {
            uint64_t a = 1000 + tick;
            for (int k = 0; k < 3; k++) {
                int64_t c = center[i][k];
                center[i][k] = c + (rnd(a, i, k, 4097) - 2048) - (c - anchor[i][k]) / 16;
                centers[i][k] = metres(center[i][k]);
            }
            for (int k = 0; k < 4; k++) {
                int64_t lo = k == 3 ? 32 : -128, q = quat[i][k] + rnd(a, i, 3 + k, 9) - 4;
                quat[i][k] = q < lo ? lo : q > 128 ? 128 : q;
                orientations[i][k] = quat[i][k] / 128.0;
            }
        }
        /* Sweeps: bodies dropped from 2 m above to 8 m below, drifting sideways (every fourth goes up),
           against the terrain and the other bodies. */
        for (uint64_t s = 0; s < SWEEPS; s++) {
            uint64_t a = 2000 + tick;
            size_t j = (size_t)rnd(a, s, 0, BODIES);
            int64_t dx = rnd(a, s, 1, 4 * ONE + 1) - 2 * ONE, dy = rnd(a, s, 2, 4 * ONE + 1) - 2 * ONE;
            NkSweep* sw = &sweeps[s];
            memcpy(sw->radii, radii[j], sizeof sw->radii);
            memcpy(sw->orientation, orientations[j], sizeof sw->orientation);
            sw->from[0] = metres(center[j][0]), sw->from[1] = metres(center[j][1]);
            sw->from[2] = metres(center[j][2] + 2 * ONE);
            sw->to[0] = metres(center[j][0] + dx), sw->to[1] = metres(center[j][1] + dy);
            sw->to[2] = metres(center[j][2] + (s % 4 == 3 ? 8 : -8) * ONE);
            sw->mask = 0xFFFFFFFFu;    /* the terrain and every body ... */
            sw->ignore = (uint32_t)j; /* ... but the one dropped */
        }

        double t1 = now();
        CHECK(nk_world_set_poses(world, ids, &centers[0][0], &orientations[0][0], BODIES));
        double ta = now();
        const NkContact* contacts;
        size_t n;
        CHECK(nk_collider_contacts(collider, world, &contacts, &n));
        double tb = now();
        /* Read every contact (a server would push the bodies apart here). */
        uint64_t h = 0xcbf29ce484222325ull;
        size_t body_body = 0;
        for (size_t i = 0; i < n; i++) {
            const NkContact* c = &contacts[i];
            h = fnv(fnv(fnv(h, c->body), c->kind), c->other);
            for (int k = 0; k < 3; k++) h = fnv(h, bits32(c->normal[k]));
            h = fnv(h, bits32(c->depth));
            for (int k = 0; k < 3; k++) h = fnv(h, bits64(c->point[k]));
            body_body += c->kind == NK_CONTACT_BODY;
        }
        double tc = now();
        CHECK(nk_collider_sweeps(collider, world, sweeps, SWEEPS, hits));
        int hit_count = 0;
        for (int s = 0; s < SWEEPS; s++) {
            if (!hits[s].hit) {
                h = fnv(h, 0);
                continue;
            }
            hit_count++;
            h = fnv(fnv(fnv(h, 1), hits[s].other), bits64(hits[s].toi));
            for (int k = 0; k < 3; k++) h = fnv(h, bits64(hits[s].point[k]));
            for (int k = 0; k < 3; k++) h = fnv(h, bits64(hits[s].normal[k]));
        }
        double t2 = now();
        api += t2 - t1;
        whole += t2 - t0;
        phase[0] += ta - t1, phase[1] += tb - ta, phase[2] += tc - tb, phase[3] += t2 - tc;
        total += n;
        run = fnv(run, h);
        if (verbose)
            printf("tick %ld: %zu contacts (%zu body-body), %d of %d sweeps hit, hash %016" PRIx64 "\n", tick, n,
                   body_body, hit_count, SWEEPS, h);
    }
    double per = ticks > 0 ? 1e3 / ticks : 0;
    printf("contacts per tick: %.1f (mean); checksum %016" PRIx64 "\n", ticks > 0 ? total / ticks : 0.0, run);
    printf("time per tick: %.3f ms (poses, contacts read, %d sweeps), %.3f ms (with moving the bodies)\n", api * per,
           SWEEPS, whole * per);
    printf("phases per tick: poses %.3f ms, contacts %.3f ms, reading them %.3f ms, sweeps %.3f ms\n", phase[0] * per,
           phase[1] * per, phase[2] * per, phase[3] * per);
    CHECK(nk_collider_free(collider));
    CHECK(nk_world_free(world));
    return 0;
}
