"""cronsource: an event-sourced scheduling engine for Argo CronWorkflows."""

__version__ = "0.1.0"
