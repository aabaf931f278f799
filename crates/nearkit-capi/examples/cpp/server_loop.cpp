// A game server's collision loop through nearkit's C API, from C++: the scene and the loop
// of examples/c/server_loop.c, with the handles owned by std::unique_ptr and failures thrown
// as exceptions.
//
//   cargo build --release -p nearkit-capi
//   c++ -std=c++17 -O2 -I crates/nearkit-capi/include crates/nearkit-capi/examples/cpp/server_loop.cpp
//       target/release/libnearkit_c.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -o server_loop_cpp   (one line)
//   ./server_loop_cpp [ticks (1000)] [cpu|cuda|auto] [--verbose]
//
// The scene is integer arithmetic (positions in units of 2^-16 m) turned into doubles exactly,
// the same as examples/c/server_loop.c and examples/rust/scene.rs.
#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nearkit.h"

namespace {

constexpr int QUADS = 96, BODIES = 4000, SWEEPS = 16, COARSE = 16;
constexpr double UNIT = 65536.0;  // positions are integers in units of 2^-16 m
constexpr int64_t ONE = 65536;
constexpr uint64_t SEED = 0x6e6561726b6974ull;

// Throws the library's message when a call fails.
void check(NkStatus status) {
    if (status != NK_STATUS_OK)
        throw std::runtime_error(std::string(nk_status_name(status)) + ": " + nk_last_error_message());
}

struct WorldFree {
    void operator()(NkWorld* w) const { nk_world_free(w); }
};
struct ColliderFree {
    void operator()(NkCollider* c) const { nk_collider_free(c); }
};
using World = std::unique_ptr<NkWorld, WorldFree>;
using Collider = std::unique_ptr<NkCollider, ColliderFree>;

World make_world(double cell_size) {
    NkWorld* w = nullptr;
    check(nk_world_new(cell_size, &w));
    return World(w);
}

Collider make_collider(NkDevice device) {
    NkCollider* c = nullptr;
    check(nk_collider_new(device, &c));
    return Collider(c);
}

// splitmix64 of (SEED, a, b, c): the scene's only source of numbers.
uint64_t hash(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t z = SEED + a * 0x9e3779b97f4a7c15ull + b * 0xd1b54a32d192ed03ull + c * 0x8cb92ba72f3d8dd3ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// An integer in [0, n).
int64_t rnd(uint64_t a, uint64_t b, uint64_t c, uint64_t n) { return static_cast<int64_t>(hash(a, b, c) % n); }

double metres(int64_t v) { return static_cast<double>(v) / UNIT; }

// Height of vertex (row, col) in units: value noise up to 4 m plus 3 cm of roughness.
int64_t height(int64_t row, int64_t col) {
    const int64_t i = row / COARSE, fr = row % COARSE, j = col / COARSE, fc = col % COARSE, n = COARSE;
    return rnd(1, i, j, 1024) * (n - fr) * (n - fc) + rnd(1, i + 1, j, 1024) * fr * (n - fc) +
           rnd(1, i, j + 1, 1024) * (n - fr) * fc + rnd(1, i + 1, j + 1, 1024) * fr * fc + rnd(2, row, col, 2048);
}

// FNV-1a over 64-bit words.
struct Fnv {
    uint64_t h = 0xcbf29ce484222325ull;
    void word(uint64_t w) { h = (h ^ w) * 0x00000100000001b3ull; }
    void f32(float v) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        word(b);
    }
    void f64(double v) {
        uint64_t b;
        std::memcpy(&b, &v, 8);
        word(b);
    }
};

// nk_world_set_poses reads the pose vectors as flat arrays of doubles.
static_assert(sizeof(std::array<double, 3>) == 3 * sizeof(double), "std::array<double, 3> is padded");
static_assert(sizeof(std::array<double, 4>) == 4 * sizeof(double), "std::array<double, 4> is padded");

struct Bodies {
    std::vector<std::array<int64_t, 3>> anchor, center;
    std::vector<std::array<int64_t, 4>> quat;
    std::vector<std::array<double, 3>> radii, centers;
    std::vector<std::array<double, 4>> orientations;
};

}  // namespace

int main(int argc, char** argv) try {
    long ticks = 1000;
    NkDevice device = NK_DEVICE_CPU;
    bool verbose = false;
    for (int a = 1; a < argc; a++) {
        const std::string arg = argv[a];
        if (arg == "-v" || arg == "--verbose") verbose = true;
        else if (arg == "cpu") device = NK_DEVICE_CPU;
        else if (arg == "cuda") device = NK_DEVICE_CUDA;
        else if (arg == "auto") device = NK_DEVICE_AUTO;
        else if (!arg.empty() && arg.find_first_not_of("0123456789") == std::string::npos) ticks = std::stol(arg);
        else {
            std::fprintf(stderr, "usage: %s [ticks] [cpu|cuda|auto] [--verbose]\n", argv[0]);
            return 2;
        }
    }

    // The terrain: a heightfield of QUADS x QUADS squares of 1 m, two triangles each.
    const int cols = QUADS + 1;
    std::vector<double> vertices;
    std::vector<uint32_t> triangles;
    for (int r = 0; r < cols; r++)
        for (int c = 0; c < cols; c++) vertices.insert(vertices.end(), {double(c), double(r), metres(height(r, c))});
    for (uint32_t r = 0; r < QUADS; r++)
        for (uint32_t c = 0; c < QUADS; c++) {
            const uint32_t v = r * cols + c, right = v + 1, up = v + cols;
            triangles.insert(triangles.end(), {v, right, up + 1, v, up + 1, up});
        }
    World world = make_world(1.0);
    check(nk_world_set_mesh(world.get(), vertices.data(), vertices.size() / 3, triangles.data(), triangles.size() / 3));
    check(nk_world_set_mesh_layer(world.get(), 1));

    // The bodies: their integer state, and the pose arrays handed to the world.
    Bodies b;
    std::vector<uint32_t> ids(BODIES);
    for (uint64_t i = 0; i < BODIES; i++) {
        std::array<double, 3> radii;
        for (uint64_t k = 0; k < 3; k++) radii[k] = metres(13107 + rnd(3, i, k, 39322));
        const int64_t x = 2 * ONE + rnd(4, i, 0, (QUADS - 4) * ONE), y = 2 * ONE + rnd(4, i, 1, (QUADS - 4) * ONE);
        const int64_t z = height((y + ONE / 2) / ONE, (x + ONE / 2) / ONE) + rnd(4, i, 2, ONE);
        std::array<int64_t, 4> q{rnd(5, i, 0, 257) - 128, rnd(5, i, 1, 257) - 128, rnd(5, i, 2, 257) - 128,
                                 32 + rnd(5, i, 3, 97)};
        b.anchor.push_back({x, y, z});
        b.center.push_back({x, y, z});
        b.quat.push_back(q);
        b.radii.push_back(radii);
        b.centers.push_back({metres(x), metres(y), metres(z)});
        b.orientations.push_back({q[0] / 128.0, q[1] / 128.0, q[2] / 128.0, q[3] / 128.0});
        const uint32_t layer = 1u << (i % 3), mask = i % 7 == 6 ? ~2u : 0xffffffffu;
        check(nk_world_add_ellipsoid(world.get(), b.centers[i].data(), radii.data(), b.orientations[i].data(), layer,
                                     mask, &ids[i]));
    }

    Collider collider = make_collider(device);
    const char* where = nullptr;
    check(nk_collider_describe(collider.get(), &where));
    size_t body_count = 0, triangle_count = 0;
    check(nk_world_body_count(world.get(), &body_count));
    check(nk_world_triangle_count(world.get(), &triangle_count));
    std::printf("server_loop (C++): %zu bodies, %zu triangles, %s, %ld ticks\n", body_count, triangle_count, where,
                ticks);

    using clock = std::chrono::steady_clock;
    std::vector<NkSweep> sweeps(SWEEPS);
    std::vector<NkSweepResult> hits(SWEEPS);
    clock::duration api{}, whole{}, phase[4]{};
    double total = 0;
    Fnv run;
    for (long tick = 0; tick < ticks; tick++) {
        const auto t0 = clock::now();
        // Move: each body steps up to 3 cm an axis, drawn back to its anchor, and turns.
        const uint64_t a = 1000 + tick;
        for (uint64_t i = 0; i < BODIES; i++) {
            for (uint64_t k = 0; k < 3; k++) {
                const int64_t c = b.center[i][k];
                b.center[i][k] = c + (rnd(a, i, k, 4097) - 2048) - (c - b.anchor[i][k]) / 16;
                b.centers[i][k] = metres(b.center[i][k]);
            }
            for (uint64_t k = 0; k < 4; k++) {
                const int64_t lo = k == 3 ? 32 : -128;
                b.quat[i][k] = std::clamp<int64_t>(b.quat[i][k] + rnd(a, i, 3 + k, 9) - 4, lo, 128);
                b.orientations[i][k] = b.quat[i][k] / 128.0;
            }
        }
        // Sweeps: bodies dropped from 2 m above to 8 m below, drifting sideways (every fourth goes up),
        // against the terrain and the other bodies.
        const uint64_t s0 = 2000 + tick;
        for (uint64_t s = 0; s < SWEEPS; s++) {
            const size_t j = static_cast<size_t>(rnd(s0, s, 0, BODIES));
            const int64_t dx = rnd(s0, s, 1, 4 * ONE + 1) - 2 * ONE, dy = rnd(s0, s, 2, 4 * ONE + 1) - 2 * ONE;
            const auto& c = b.center[j];
            NkSweep& sw = sweeps[s];
            std::copy(b.radii[j].begin(), b.radii[j].end(), sw.radii);
            std::copy(b.orientations[j].begin(), b.orientations[j].end(), sw.orientation);
            const double from[3] = {metres(c[0]), metres(c[1]), metres(c[2] + 2 * ONE)};
            const double to[3] = {metres(c[0] + dx), metres(c[1] + dy), metres(c[2] + (s % 4 == 3 ? 8 : -8) * ONE)};
            std::copy(from, from + 3, sw.from);
            std::copy(to, to + 3, sw.to);
            sw.mask = 0xFFFFFFFFu;                  // the terrain and every body...
            sw.ignore = static_cast<uint32_t>(j);  // ...but the one dropped
        }

        const auto t1 = clock::now();
        // std::array<double, N> holds N doubles in a row, so the vectors are flat arrays.
        check(nk_world_set_poses(world.get(), ids.data(), b.centers[0].data(), b.orientations[0].data(), BODIES));
        const auto ta = clock::now();
        const NkContact* contacts = nullptr;
        size_t n = 0;
        check(nk_collider_contacts(collider.get(), world.get(), &contacts, &n));
        const auto tb = clock::now();
        // Read every contact (a server would push the bodies apart here).
        Fnv h;
        size_t body_body = 0;
        for (const NkContact* c = contacts; c != contacts + n; ++c) {
            h.word(c->body), h.word(c->kind), h.word(c->other);
            for (float v : c->normal) h.f32(v);
            h.f32(c->depth);
            for (double v : c->point) h.f64(v);
            body_body += c->kind == NK_CONTACT_BODY;
        }
        const auto tc = clock::now();
        check(nk_collider_sweeps(collider.get(), world.get(), sweeps.data(), sweeps.size(), hits.data()));
        int hit_count = 0;
        for (const NkSweepResult& r : hits) {
            if (!r.hit) {
                h.word(0);
                continue;
            }
            hit_count++;
            h.word(1), h.word(r.other), h.f64(r.toi);
            for (double v : r.point) h.f64(v);
            for (double v : r.normal) h.f64(v);
        }
        const auto t2 = clock::now();
        api += t2 - t1;
        whole += t2 - t0;
        phase[0] += ta - t1, phase[1] += tb - ta, phase[2] += tc - tb, phase[3] += t2 - tc;
        total += n;
        run.word(h.h);
        if (verbose)
            std::printf("tick %ld: %zu contacts (%zu body-body), %d of %d sweeps hit, hash %016" PRIx64 "\n", tick, n,
                        body_body, hit_count, SWEEPS, h.h);
    }
    const auto per = [&](clock::duration d) {
        return ticks > 0 ? std::chrono::duration<double, std::milli>(d).count() / ticks : 0.0;
    };
    std::printf("contacts per tick: %.1f (mean); checksum %016" PRIx64 "\n", ticks > 0 ? total / ticks : 0.0, run.h);
    std::printf("time per tick: %.3f ms (poses, contacts read, %d sweeps), %.3f ms (with moving the bodies)\n",
                per(api), SWEEPS, per(whole));
    std::printf("phases per tick: poses %.3f ms, contacts %.3f ms, reading them %.3f ms, sweeps %.3f ms\n",
                per(phase[0]), per(phase[1]), per(phase[2]), per(phase[3]));
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
