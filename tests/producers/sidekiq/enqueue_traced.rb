# Enqueue N ChargeCardWorker jobs on QUEUE, each carrying W3C trace context in the job hash the way
# opentelemetry-instrumentation-sidekiq's client middleware writes it (`OpenTelemetry.propagation
# .inject(job)`: top-level `traceparent`, and `tracestate` when there is one). The OpenTelemetry gems
# are not packaged in Debian, so this middleware writes the same keys itself.
# Prints {"<jid>": "<trace id>"}: ruby enqueue_traced.rb N QUEUE
require "json"
require "securerandom"
require_relative "worker"

TRACES = {}

class TraceContextInjector
  include Sidekiq::ClientMiddleware if defined?(Sidekiq::ClientMiddleware)

  def call(_worker_class, job, _queue, _redis_pool)
    trace_id = SecureRandom.hex(16)
    TRACES[job["jid"]] = trace_id
    job["traceparent"] = "00-#{trace_id}-#{SecureRandom.hex(8)}-03"
    job["tracestate"] = "dlqtest=1"
    yield
  end
end

Sidekiq.configure_client { |config| config.client_middleware { |chain| chain.add TraceContextInjector } }

Integer(ARGV.fetch(0, "1")).times { |i| ChargeCardWorker.set(queue: ARGV.fetch(1, "billing")).perform_async(i + 1) }
puts JSON.generate(TRACES)
