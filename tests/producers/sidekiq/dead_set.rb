# Sidekiq's own API on its dead set (REDIS_URL), as Sidekiq Web and the app would use it:
#   ruby dead_set.rb retry JID...       Sidekiq::DeadSet#find_job(jid).retry (what "Retry" in Sidekiq Web does)
#   ruby dead_set.rb delete JID...      ...delete ("Delete" in Sidekiq Web)
#   ruby dead_set.rb kill MAX_JOBS N    N more jobs die through DeadSet#kill with dead_max_jobs = MAX_JOBS:
#                                       the same call Sidekiq's retry handler makes, trimming the set as it does
require "sidekiq"
require "sidekiq/api"
require "securerandom"
require_relative "worker"

action, *rest = ARGV
dead = Sidekiq::DeadSet.new
case action
when "retry", "delete"
  rest.each do |jid|
    job = dead.find_job(jid) or abort("no dead job #{jid}")
    action == "retry" ? job.retry : job.delete
  end
when "kill"
  Sidekiq.options[:dead_max_jobs] = Integer(rest[0])
  Integer(rest[1]).times do |i|
    job = {"class" => "ChargeCardWorker", "args" => [900 + i], "queue" => "billing", "jid" => SecureRandom.hex(12),
           "retry" => 0, "created_at" => Time.now.to_f, "enqueued_at" => Time.now.to_f,
           "error_class" => "ArgumentError", "error_message" => "card declined for order #{900 + i}",
           "failed_at" => Time.now.to_f, "retry_count" => 0}
    dead.kill(Sidekiq.dump_json(job), notify_failure: false)
  end
else
  abort("usage: dead_set.rb retry|delete JID... | kill MAX_JOBS N")
end
