# Enqueue N ChargeCardWorker jobs on REDIS_URL: ruby enqueue.rb N
require_relative "worker"

Integer(ARGV.fetch(0, "1")).times { |i| ChargeCardWorker.perform_async(i + 1) }
