"""Every sink type the bridge knows: one line per plug-in (docs/architecture.md, "How to add a sink").

The `[[sinks]]` tables are validated by these plug-ins' models, and every stage asks a route's
plug-in (`SINKS.of(settings)`) for its traits; nothing else names a sink type.
"""

from __future__ import annotations

from bridge.sinks import alertmanager, console, email, pagerduty, slack, teams, webhook
from bridge.sinks.sink_plugin import SinkRegistry

SINKS = SinkRegistry([
    console.PLUGIN,
    slack.PLUGIN,
    pagerduty.PLUGIN,
    webhook.PLUGIN,
    teams.PLUGIN,
    email.PLUGIN,
    alertmanager.PLUGIN,
])
