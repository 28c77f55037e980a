# A real Sidekiq worker that raises: with retry 0, Sidekiq moves each failed job straight to
# its `dead` sorted set (the test producer for the sidekiq source kind).
require "sidekiq"

class ChargeCardWorker
  include Sidekiq::Worker
  sidekiq_options retry: 0, queue: "billing"

  def perform(order_id)
    raise ArgumentError, "card declined for order #{order_id}"
  end
end

# The storm's outage (tests/test_storm_fleet.py): the database is down for every queue.
class ConnectionRefusedError < StandardError; end

class SyncInventoryWorker
  include Sidekiq::Worker
  sidekiq_options retry: 0, queue: "sq-inventory"

  def perform(order_id)
    raise ConnectionRefusedError, "postgres-primary:5432 refused connection (order #{order_id})"
  end
end
