"""Alert sinks: console, Slack, PagerDuty, webhook — one module each."""
