"""`logbroker perf`'s load engine: producers, consumers, latency, per-second samples, plots.

A PerfTest-like run against any AMQP 0-9-1 broker (RabbitMQ too) or this broker's
WebSocket API. The pure parts (`latency_histogram`, `pacing`, `sampler`,
`run_limits`, `topology_plan`, `perf_settings`) decide; `perf_run` drives them
with the injected clock; the transports (`amqp_transport`, `ws_transport`)
move the bytes.
"""
