"""The clients the bridge talks through: the one Redis client factory (`redis_client`, with
`redis_conn`'s connection), the embedded Redis server (`embedded`), Redis memory and eviction
checks (`redis_memory`), `WAIT` for replicas (`replicas`), gathering calls into one round trip
(`batching`) and the one shared HTTP client (`http`).
"""
