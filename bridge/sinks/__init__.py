"""Sink types, one module each (one package for email): `slack`, `pagerduty`, `teams` (with
`teams_card`), `email`, `alertmanager`, `webhook` (plain or CloudEvents: `cloudevents`; signatures
and headers: `signing`) and `console`. `sink_registry` lists them (`SINKS`); `sink_plugin` is the
plug-in contract, `sink` the `Sink` protocol, `sink_settings` the keys every table has, `digest` the text
of group notifications and `http_errors` how an HTTP answer maps to a retry or a failure.
"""
