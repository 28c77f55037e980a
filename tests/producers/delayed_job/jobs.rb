# Test producer: Delayed Job (ActiveRecord backend, Debian ruby-delayed-job-active-record) on PostgreSQL.
# A job that raises twice ends with failed_at set (destroy_failed_jobs = false, as apps that keep them set).
# usage: ruby jobs.rb <postgres url> produce <queue> <count>   → prints the failed job ids
#        ruby jobs.rb <postgres url> requeue <id>...            (what delayed_job_web's Requeue does)
#        ruby jobs.rb <postgres url> delete <id>...
require "logger"
require "active_record"
require "delayed_job"
require "delayed_job_active_record"

class CardDeclined < StandardError; end

ChargeCardJob = Struct.new(:order_id) do
  def perform
    raise CardDeclined, "card declined for order #{order_id}"
  end

  def max_attempts
    2
  end

  def reschedule_at(now, _attempts)
    now # retry at once (the default waits 5 s + attempts**4)
  end
end

url, action, *rest = ARGV
ActiveRecord::Base.establish_connection(url)
ActiveRecord::Base.default_timezone = :utc
ActiveRecord::Base.logger = nil
Delayed::Worker.destroy_failed_jobs = false
Delayed::Worker.logger = Logger.new(nil)

def create_jobs_table
  return if ActiveRecord::Base.connection.table_exists?(:delayed_jobs)

  # delayed_job_active_record's own migration (lib/generators/delayed_job/templates/migration.rb)
  ActiveRecord::Schema.define do
    create_table :delayed_jobs do |table|
      table.integer :priority, default: 0, null: false
      table.integer :attempts, default: 0, null: false
      table.text :handler,                 null: false
      table.text :last_error
      table.datetime :run_at
      table.datetime :locked_at
      table.datetime :failed_at
      table.string :locked_by
      table.string :queue
      table.timestamps null: true
    end
    add_index :delayed_jobs, [:priority, :run_at], name: "delayed_jobs_priority"
  end
end

case action
when "produce"
  ActiveRecord::Migration.verbose = false
  create_jobs_table
  queue, count = rest[0], Integer(rest[1])
  ids = (1..count).map { |i| Delayed::Job.enqueue(ChargeCardJob.new(i), queue: queue).id }
  worker = Delayed::Worker.new(quiet: true, queues: [queue])
  deadline = Time.now + 60
  until Delayed::Job.where(id: ids).where.not(failed_at: nil).count == count
    raise "timed out waiting for failed jobs" if Time.now > deadline

    worker.work_off
  end
  puts ids.join(" ")
when "requeue"
  rest.each { |id| Delayed::Job.find(Integer(id)).update!(failed_at: nil, run_at: Time.now) }
when "delete"
  rest.each { |id| Delayed::Job.find(Integer(id)).destroy }
else
  abort "unknown action #{action}"
end
