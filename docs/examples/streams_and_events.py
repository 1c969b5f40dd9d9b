"""Producer and consumer streams joined by an event; host callbacks; timing.

Run it with ``python3 docs/examples/streams_and_events.py``. It checks every
result with ``assert`` and exits non-zero if one is wrong.

Work on one stream runs in the order it was queued. Two streams are not
ordered at all unless an event joins them: the producer records an event
after its work, and the consumer waits for that event before its own.
"""

import threading

import numpy as np

import chipdock

dev = chipdock.device("cpu:0")
n = 8 << 20  # 8 Mi float32 values (32 MiB): large enough to take a while
data = np.arange(n, dtype=np.float32)
src = chipdock.tensor(data, device=dev)  # host -> device; blocks until copied
staged = chipdock.empty(n, chipdock.float32, device=dev)
result = chipdock.zeros(n, dtype=chipdock.float32, device=dev)
dev.synchronize()  # the zeros above were queued on the default stream

producer = chipdock.Stream(dev)
consumer = chipdock.Stream(dev)
produced = chipdock.Event(dev)  # timing is on by default
started = chipdock.Event(dev)
finished = chipdock.Event(dev)
log = []

with chipdock.stream(producer):
    started.record()
    for _ in range(4):  # some real device work: four 32 MiB copies
        staged.copy_(src)
    produced.record()
    # A host callback runs on a host thread once the work queued before it
    # is done. Keep it short and never synchronize a stream from inside it.
    producer.add_callback(lambda: log.append("produced"))

# Without this line the consumer could read `staged` before it is written.
consumer.wait_event(produced)
with chipdock.stream(consumer):
    result.copy_(staged)
    finished.record()

# The host has only queued work so far. Now it waits for the consumer.
finished.synchronize()
assert np.array_equal(result.numpy(), data), "the consumer ran before the producer"

producer.synchronize()  # the callback ran before synchronize returned
assert log == ["produced"]

# Timing: both events were recorded with timing enabled (the default) and
# have completed, so elapsed_time does not block.
ms_produce = started.elapsed_time(produced)
ms_total = started.elapsed_time(finished)
assert 0.0 <= ms_produce <= ms_total
print(f"producer: 4 x {src.nbytes >> 20} MiB copies in {ms_produce:.2f} ms "
      f"({4 * src.nbytes / ms_produce / 1e6:.1f} GB/s)")
print(f"producer + consumer: {ms_total:.2f} ms")

# The current stream is per thread: a new thread starts on the default stream.
seen = []
with chipdock.stream(consumer):
    worker = threading.Thread(target=lambda: seen.append(chipdock.current_stream(dev).id))
    worker.start()
    worker.join()
    assert chipdock.current_stream(dev).id == consumer.id
assert seen == [chipdock.default_stream(dev).id]
assert chipdock.current_stream(dev).id == chipdock.default_stream(dev).id

producer.destroy()  # waits for queued work, then releases the stream
consumer.destroy()
assert producer.destroyed and consumer.destroyed
print("streams_and_events: all checks passed")
