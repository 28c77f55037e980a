"""The drain: every source's claim loop, from a claimed entry to its hand-off and acknowledgement.

`pipeline` (the one drain and the chain of stages: claim → intake → summarize → route →
hand-off → acknowledge), `slots` (worker slots shared by every source), `solo` (a suspect's
intake runs alone), `quarantine` (the static alert of a quarantined entry), `upkeep` (heartbeat,
rescan, reap, sweeps, leave checks), `depths` (the depth gauges) and `traced` (the chain's stages
in the bridge's own spans, with tracing on).
"""
