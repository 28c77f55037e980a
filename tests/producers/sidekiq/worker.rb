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
