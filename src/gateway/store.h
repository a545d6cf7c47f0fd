// The conversation store lives in its own module (store/store.h); the gateway names its types
// as its own.
#pragma once

#include "store/store.h"

namespace glm::gateway {

using store::Conversation;
using store::conversation_json;
using store::message_json;
using store::now_unix_ms;
using store::Store;
using store::StoredMessage;
using store::StoredResponse;

}  // namespace glm::gateway
