// Events: markers in a stream. Each event_record creates a new Marker that a
// task on the stream completes (taking a timestamp unless timing is
// disabled); the event points at its most recent marker. stream_wait_event
// captures that marker at enqueue time, so a later re-record never changes
// what an already enqueued wait waits for, and records that complete out of
// order on different streams cannot satisfy a wait early.
#ifndef CHIPDOCK_CPU_EVENT_H_
#define CHIPDOCK_CPU_EVENT_H_

#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_cpu {

cd_event* event_create(int32_t device, uint32_t flags);
void event_destroy(cd_event* handle);
void event_record(cd_event* event, cd_stream* stream);
void event_synchronize(cd_event* event);
bool event_query(cd_event* event);
float event_elapsed_ms(cd_event* start, cd_event* end);
void stream_wait_event(cd_stream* stream, cd_event* event);

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_EVENT_H_
