// Keeps the process alive when a memory-mapped model file shrinks under it.
//
// Truncating or rewriting a file in place (`cp other.gguf served.gguf`) drops
// the page-cache pages of the mapping; the next read of such a page raises
// SIGBUS, which would kill the server. A guarded mapping is registered here;
// a process-wide SIGBUS handler (installed once, chaining the previous one)
// maps an anonymous zero page over a faulting page that lies inside a guarded
// mapping, records the fault on that mapping and returns, so the read yields
// zeros. The owner polls mapping_faulted() and stops using the data (the
// runtime fails the request and marks the model unusable). Faults anywhere
// else go to the previous handler, or take the default action.
#pragma once
#include <cstddef>

namespace guild::gguf {

// Registers [base, base + bytes). Returns the slot to pass to the functions
// below, or -1 when every slot is taken (the mapping is then unguarded).
int guard_mapping(const void* base, size_t bytes);
// Forgets the slot; call before unmapping.
void unguard_mapping(int slot);
// True once a read inside the mapping faulted and was replaced by zeros.
bool mapping_faulted(int slot);

}  // namespace guild::gguf
