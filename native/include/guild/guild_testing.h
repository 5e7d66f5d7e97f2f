/* Guild C ABI: hooks for tests only (not part of the public API in guild.h;
 * the app never calls them). Include after guild.h. */
#ifndef GUILD_TESTING_H
#define GUILD_TESTING_H

#include "guild/guild.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model's next generation fails after its first device work, as a device
 * error would (readiness then stays false). */
GUILD_API void guild_testing_inject_fault(guild_model* model);

#ifdef __cplusplus
}
#endif

#endif /* GUILD_TESTING_H */
