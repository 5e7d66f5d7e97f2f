#include "runtime/execution_state.h"

namespace guild {
namespace {
thread_local const ModelExecutionState* t_current = nullptr;
}

const ModelExecutionState* current_execution_state() { return t_current; }

ScopedModelExecution::ScopedModelExecution(const ModelExecutionState* state) : previous_(t_current) {
  t_current = state;
}

ScopedModelExecution::~ScopedModelExecution() { t_current = previous_; }

}  // namespace guild
