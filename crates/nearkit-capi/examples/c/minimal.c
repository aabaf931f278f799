/* The README's C example: a sphere resting on a triangle, and a ray cast down onto it. */
#include <math.h>
#include <stdio.h>

#include "nearkit.h"

static int ok(NkStatus status) {
    if (status != NK_STATUS_OK) fprintf(stderr, "%s: %s\n", nk_status_name(status), nk_last_error_message());
    return status == NK_STATUS_OK;
}

int main(void) {
    double vertices[] = {-10, -10, 0, 10, -10, 0, 0, 10, 0}; /* x, y, z of each vertex */
    uint32_t triangles[] = {0, 1, 2};
    double center[3] = {0, 0, 0.4};
    NkWorld* world = NULL;
    NkCollider* collider = NULL;
    uint32_t id;
    const NkContact* contacts; /* the collider's buffer: valid until its next tick */
    size_t n;
    if (!ok(nk_world_new(1.0, &world)) || !ok(nk_world_set_mesh(world, vertices, 3, triangles, 1)) ||
        !ok(nk_world_add_sphere(world, center, 0.5, 1, 0xffffffffu, &id)) ||
        !ok(nk_collider_new(NK_DEVICE_CPU, &collider)) || !ok(nk_collider_contacts(collider, world, &contacts, &n)))
        return 1;
    for (size_t i = 0; i < n; i++)
        printf("body %u touches triangle %u, depth %.3f\n", contacts[i].body, contacts[i].other, contacts[i].depth);
    /* A ray straight down from 5 m: origin, direction, reach, mask. */
    NkRay ray = {{0, 0, 5}, {0, 0, -1}, INFINITY, 0xffffffffu};
    NkRayHit hit;
    if (!ok(nk_collider_ray_casts(collider, world, &ray, 1, &hit))) return 1;
    printf("the ray hits %s %u at distance %.3f\n", hit.kind == NK_CONTACT_BODY ? "body" : "triangle", hit.id,
           hit.distance);
    nk_collider_free(collider);
    nk_world_free(world);
    return 0;
}
