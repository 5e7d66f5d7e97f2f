// A JSON summary of a model's files, read from metadata and tensor infos only
// (no weights touched): what `guild inspect` prints.
#pragma once
#include "artifact/gguf.h"
#include "core/json.h"

namespace guild {

json::Value inspect_model(const gguf::ModelFiles& files);

// One metadata value as JSON; arrays longer than max_items are summarised as
// {"type":"array","elem_type":…,"count":N,"head":[first max_items]}.
json::Value metadata_value_json(const gguf::MetaValue& v, size_t max_items = 16);

}  // namespace guild
