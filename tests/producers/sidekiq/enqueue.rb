# Enqueue N jobs of a worker class (default ChargeCardWorker) on REDIS_URL: ruby enqueue.rb N [Class]
require_relative "worker"

worker = Object.const_get(ARGV.fetch(1, "ChargeCardWorker"))
Integer(ARGV.fetch(0, "1")).times { |i| worker.perform_async(i + 1) }
