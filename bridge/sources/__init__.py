"""Dead-letter sources: Redis lists now; streams, BullMQ, Sidekiq, RQ later."""
