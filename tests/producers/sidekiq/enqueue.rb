# Enqueue N jobs of a worker class (default ChargeCardWorker) on REDIS_URL, on QUEUE when given
# (else the class's own): ruby enqueue.rb N [Class] [QUEUE]
require_relative "worker"

worker = Object.const_get(ARGV.fetch(1, "ChargeCardWorker"))
queue = ARGV[2]
Integer(ARGV.fetch(0, "1")).times { |i| (queue ? worker.set(queue: queue) : worker).perform_async(i + 1) }
